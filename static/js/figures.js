/*
 * Cluster Atlas figures: draws every element with a `data-figure` or `data-figure-url`
 * attribute with the locally served plotly.js (static/vendor/plotly-<version>.min.js).
 *
 * How a template uses it (or simply {% include "core/_figure.html" %}, see there):
 *
 *   1. The figure JSON in the page, from a view that built it (per-server figures):
 *        <div class="figure" data-figure="matrix-data" role="img" aria-label="..."></div>
 *        {{ figures.interconnect_matrix|json_script:"matrix-data" }}
 *      `data-figure` names the id of the json_script element; nothing else is inlined.
 *
 *   2. The figure from the API (fleet figures, rendered by Celery):
 *        <div class="figure pending" data-figure-url="/api/v1/figures/racks/">Rendering…</div>
 *      While the API answers 202 (not rendered yet) the element keeps its pending text and is
 *      asked again, less and less often; an answer with `"current": false` (a stale render,
 *      served while the next one is built) is drawn and asked again until it is current.
 *      `data-figure-refresh="60"` keeps asking every 60 s after that, redrawn with
 *      Plotly.react.
 *
 *   3. Once per page, after the elements (the {% block scripts %} of base.html):
 *        {% include "core/_figure_scripts.html" %}
 *
 * Nothing here talks to another host: URLs must be same-origin paths ("/..."), requests
 * carry the session cookie, and plotly.js comes from this server. A click on a point whose
 * figure says `layout.meta.links` and whose customdata starts with a path opens that path
 * (servers in the rack view).
 */
(function () {
  "use strict";

  var CONFIG = {
    responsive: true,
    displaylogo: false,
    displayModeBar: "hover",
    modeBarButtonsToRemove: [
      "select2d", "lasso2d", "autoScale2d", "toggleSpikelines",
      "hoverClosestCartesian", "hoverCompareCartesian", "zoomIn2d", "zoomOut2d"
    ],
    toImageButtonOptions: { format: "png", scale: 2 }
  };
  var FIRST_DELAY_MS = 1500;
  var MAX_DELAY_MS = 30000;

  function isLocalPath(url) {
    return typeof url === "string" && url.charAt(0) === "/" && url.charAt(1) !== "/" &&
      url.charAt(1) !== "\\";
  }

  function setPending(el, text) {
    el.classList.add("pending");
    el.setAttribute("aria-busy", "true");
    if (!el.dataset.drawn) {
      el.textContent = text;
    }
  }

  function draw(el, figure) {
    if (typeof Plotly === "undefined") {
      setPending(el, "The plotting library did not load.");
      return;
    }
    if (!el.dataset.drawn) {
      el.textContent = "";
    }
    el.classList.remove("pending");
    el.removeAttribute("aria-busy");
    var layout = Object.assign({ autosize: true }, figure.layout || {});
    // A figure says how narrow it may get and stay legible (layout.meta.min_width, px);
    // narrower screens scroll it inside its .figure-scroll wrapper. CSSOM, not a style
    // attribute: the Content-Security-Policy allows this.
    var minWidth = layout.meta && parseInt(layout.meta.min_width, 10);
    if (minWidth > 0) {
      el.style.minWidth = minWidth + "px";
    }
    Plotly.react(el, figure.data || [], layout, CONFIG).then(function () {
      if (!el.dataset.drawn) {
        el.dataset.drawn = "1";
        el.on("plotly_click", function (event) { follow(el, event); });
      }
    });
  }

  function follow(el, event) {
    var meta = el.layout && el.layout.meta;
    var point = event && event.points && event.points[0];
    if (!meta || !meta.links || !point) {
      return;
    }
    var data = point.customdata;
    var url = Array.isArray(data) ? data[0] : data;
    if (isLocalPath(url)) {
      window.location.assign(url);
    }
  }

  function fromScript(el) {
    var source = document.getElementById(el.dataset.figure);
    if (!source) {
      setPending(el, "Figure data missing.");
      return;
    }
    try {
      draw(el, JSON.parse(source.textContent));
    } catch (error) {
      setPending(el, "This figure could not be drawn.");
      if (window.console) { console.warn("figure", el.dataset.figure, error); }
    }
  }

  function fromUrl(el, delay) {
    var url = el.dataset.figureUrl;
    if (!isLocalPath(url)) {
      setPending(el, "Figure URL must be a path on this server.");
      return;
    }
    var again = function (next) {
      window.setTimeout(function () { fromUrl(el, next); }, next);
    };
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (response.status === 202) {
          setPending(el, "Rendering… this figure appears when it is ready.");
          again(Math.min(delay * 1.5, MAX_DELAY_MS));
          return null;
        }
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.json();
      })
      .then(function (body) {
        if (!body) {
          return;
        }
        if (body.revision !== el.dataset.revision) {
          el.dataset.revision = body.revision;
          draw(el, body.figure);
        }
        var refresh = parseInt(el.dataset.figureRefresh || "0", 10);
        if (body.current === false) {
          again(Math.min(delay * 1.5, MAX_DELAY_MS));
        } else if (refresh > 0) {
          again(refresh * 1000);
        }
      })
      .catch(function (error) {
        setPending(el, "This figure could not be loaded (" + error.message + "); retrying.");
        again(MAX_DELAY_MS);
      });
  }

  function init() {
    var elements = document.querySelectorAll("[data-figure], [data-figure-url]");
    Array.prototype.forEach.call(elements, function (el) {
      if (el.dataset.figure) {
        fromScript(el);
      } else {
        fromUrl(el, FIRST_DELAY_MS);
      }
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
