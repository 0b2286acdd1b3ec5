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
 *      It names plotly.js in `data-plotly-src` and embeds core.figures.figure_themes().
 *
 * When (a page shows its text and tables first): a figure is drawn only once it comes near
 * the viewport (an IntersectionObserver, NEAR_PX ahead), after the browser has painted, one
 * figure per task; plotly.js itself is loaded when the first figure needs it, or when the
 * page is idle. Until then the element keeps its label as placeholder text and the figure's
 * own height (layout.height) and width (layout.meta.min_width), so nothing moves when it
 * is drawn. Printing draws every figure first, in the light theme.
 *
 * Theme: figures are built light. When the browser prefers dark, each is drawn through
 * figure_themes().dark (backgrounds, text, rules and state colours swapped; marks too close
 * to the dark paper lightened), and redrawn with Plotly.react when the preference changes.
 *
 * Export: the mode bar downloads PNG (its camera) and SVG (the button after it).
 *
 * Nothing here talks to another host: URLs must be same-origin paths ("/..."), requests
 * carry the session cookie, and plotly.js comes from this server. A click on a point whose
 * figure says `layout.meta.links` and whose customdata starts with a path opens that path
 * (servers in the rack view). No inline script or style: sizes go through the CSSOM, which
 * the Content-Security-Policy allows.
 */
(function () {
  "use strict";

  var SCRIPT = document.currentScript;
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
  var NEAR_PX = 200;
  var DARK = "(prefers-color-scheme: dark)";
  var HEX = /^#[0-9a-f]{6}$/i;
  var LINE_KEYS = { gridcolor: 1, linecolor: 1, zerolinecolor: 1, bordercolor: 1, tickcolor: 1 };
  var BACKGROUND_KEYS = { paper_bgcolor: 1, plot_bgcolor: 1, bgcolor: 1 };

  var elements = [];
  var queue = [];
  var pumping = false;
  var plotly = null;
  var printing = false;
  var themeData = null;

  function isLocalPath(url) {
    return typeof url === "string" && url.charAt(0) === "/" && url.charAt(1) !== "/" &&
      url.charAt(1) !== "\\";
  }

  function state(el) {
    if (!el.atlasFigure) {
      el.atlasFigure = { figure: null, near: false, queued: false, drawn: false };
    }
    return el.atlasFigure;
  }

  function setPending(el, text) {
    el.classList.add("pending");
    el.setAttribute("aria-busy", "true");
    if (!state(el).drawn) {
      el.textContent = text;
    }
  }

  // plotly.js, loaded once, when the first figure needs it (or the page is idle).
  function loadPlotly() {
    if (!plotly) {
      plotly = new Promise(function (resolve, reject) {
        if (typeof Plotly !== "undefined") {
          resolve();
          return;
        }
        var src = SCRIPT && SCRIPT.dataset.plotlySrc;
        if (!isLocalPath(src)) {
          reject(new Error("plotly.js must be a path on this server"));
          return;
        }
        var script = document.createElement("script");
        script.src = src;
        script.onload = function () {
          if (typeof Plotly === "undefined") {
            reject(new Error("plotly.js did not define Plotly"));
          } else {
            resolve();
          }
        };
        script.onerror = function () { reject(new Error("plotly.js did not load")); };
        document.head.appendChild(script);
      });
    }
    return plotly;
  }

  // --- theme ---------------------------------------------------------------------------

  function themes() {
    if (themeData === null) {
      var source = document.getElementById("atlas-figure-themes");
      try {
        themeData = source ? JSON.parse(source.textContent) : {};
      } catch (error) {
        themeData = {};
      }
    }
    return themeData;
  }

  function scheme() {
    if (printing || !window.matchMedia) {
      return "light";
    }
    return window.matchMedia(DARK).matches ? "dark" : "light";
  }

  function luminance(hex) {
    var channels = [1, 3, 5].map(function (i) {
      var c = parseInt(hex.substr(i, 2), 16) / 255;
      return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * channels[0] + 0.7152 * channels[1] + 0.0722 * channels[2];
  }

  function contrast(a, b) {
    var la = luminance(a);
    var lb = luminance(b);
    return (Math.max(la, lb) + 0.05) / (Math.min(la, lb) + 0.05);
  }

  function towardWhite(hex, fraction) {
    return "#" + [1, 3, 5].map(function (i) {
      var c = parseInt(hex.substr(i, 2), 16);
      var mixed = Math.round(c + (255 - c) * fraction).toString(16);
      return mixed.length < 2 ? "0" + mixed : mixed;
    }).join("");
  }

  // A mark colour that stands `theme.mark_contrast` from the paper, lightened if it must.
  function visibleMark(hex, theme) {
    var memo = theme.memo || (theme.memo = {});
    if (!memo[hex]) {
      var out = hex;
      for (var step = 1; step <= 10 && contrast(out, theme.paper) < theme.mark_contrast; step++) {
        out = towardWhite(hex, step / 10);
      }
      memo[hex] = out;
    }
    return memo[hex];
  }

  function swap(colour, key, parentKey, theme, light) {
    var hex = colour.toLowerCase();
    if (BACKGROUND_KEYS[key]) {
      return hex === light ? theme.paper : colour;
    }
    if (key === "color" && /font$/i.test(parentKey || "")) {
      return theme.text[hex] || colour;  // white text on a mark stays white
    }
    if (LINE_KEYS[key]) {
      return theme.lines[hex] || colour;
    }
    if (hex === light) {
      return theme.paper;  // separators and fills drawn in the paper's colour
    }
    return visibleMark(theme.marks[hex] || hex, theme);
  }

  function recolour(value, theme, light, key, parentKey) {
    if (Array.isArray(value)) {
      return value.map(function (item) { return recolour(item, theme, light, key, parentKey); });
    }
    if (value && typeof value === "object") {
      var out = {};
      Object.keys(value).forEach(function (k) {
        out[k] = recolour(value[k], theme, light, k, key);
      });
      return out;
    }
    if (typeof value === "string" && HEX.test(value) && /colou?r/i.test(key || "")) {
      return swap(value, key, parentKey, theme, light);
    }
    return value;
  }

  // The figure as this scheme draws it (the light figure itself when there is no theme).
  function themed(figure, name) {
    var theme = themes()[name];
    if (!theme) {
      return { data: figure.data || [], layout: figure.layout || {} };
    }
    var layout = figure.layout || {};
    var light = String(layout.paper_bgcolor || "#ffffff").toLowerCase();
    var out = {
      data: recolour(figure.data || [], theme, light),
      layout: recolour(layout, theme, light)
    };
    if (theme.modebar) {
      out.layout.modebar = Object.assign({}, theme.modebar, out.layout.modebar || {});
    }
    return out;
  }

  // --- drawing -------------------------------------------------------------------------

  function nameOf(el) {
    return (el.id || "figure").replace(/^figure-/, "");
  }

  function config(el) {
    var name = nameOf(el);
    var svg = {
      name: "downloadSvg",
      title: "Download as SVG",
      icon: Plotly.Icons["camera-retro"] || Plotly.Icons.camera,
      click: function (gd) { Plotly.downloadImage(gd, { format: "svg", filename: name }); }
    };
    return Object.assign({}, CONFIG, {
      toImageButtonOptions: Object.assign({}, CONFIG.toImageButtonOptions, { filename: name }),
      modeBarButtonsToAdd: [svg]
    });
  }

  // Keep the figure's own size while it waits, so nothing moves when it is drawn.
  function reserve(el, figure) {
    var layout = (figure && figure.layout) || {};
    var minWidth = layout.meta && parseInt(layout.meta.min_width, 10);
    if (minWidth > 0) {
      el.style.minWidth = minWidth + "px";
    }
    var height = parseInt(layout.height, 10);
    if (height > 0) {
      var style = window.getComputedStyle(el);
      var frame = ["paddingTop", "paddingBottom", "borderTopWidth", "borderBottomWidth"]
        .reduce(function (sum, side) { return sum + (parseFloat(style[side]) || 0); }, 0);
      el.style.minHeight = Math.ceil(height + frame) + "px";
    }
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

  function drawNow(el) {
    var s = state(el);
    if (!s.figure) {
      return Promise.resolve();
    }
    var name = scheme();
    var figure;
    try {
      figure = themed(s.figure, name);
    } catch (error) {
      figure = { data: s.figure.data || [], layout: s.figure.layout || {} };
    }
    if (!s.drawn) {
      el.textContent = "";
    }
    el.classList.remove("pending");
    el.removeAttribute("aria-busy");
    var layout = Object.assign({ autosize: true }, figure.layout);
    return Plotly.react(el, figure.data, layout, config(el)).then(function () {
      el.dataset.theme = name;
      if (!s.drawn) {
        s.drawn = true;
        el.dataset.drawn = "1";
        el.on("plotly_click", function (event) { follow(el, event); });
        if (window.performance && performance.mark) {
          performance.mark("atlas:figure-drawn:" + nameOf(el));
        }
      }
    }).catch(function (error) {
      setPending(el, "This figure could not be drawn.");
      if (window.console) { console.warn("figure", nameOf(el), error); }
    });
  }

  // After the browser has painted what it has: the frame, then a task of its own.
  function afterPaint(callback) {
    window.requestAnimationFrame(function () { window.setTimeout(callback, 0); });
  }

  // One figure per task, so text, tables and scrolling stay ahead of the drawing.
  function pump() {
    if (pumping || !queue.length) {
      return;
    }
    pumping = true;
    afterPaint(function () {
      loadPlotly().then(function () {
        var el = queue.shift();
        state(el).queued = false;
        return drawNow(el);
      }, function (error) {
        queue.splice(0).forEach(function (el) {
          state(el).queued = false;
          setPending(el, "The plotting library did not load.");
        });
        if (window.console) { console.warn("figures", error); }
      }).then(function () {
        pumping = false;
        pump();
      });
    });
  }

  function schedule(el) {
    var s = state(el);
    if (s.figure && s.near && !s.queued) {
      s.queued = true;
      queue.push(el);
      pump();
    }
  }

  function show(el, figure) {
    state(el).figure = figure;
    reserve(el, figure);
    schedule(el);
  }

  // --- sources -------------------------------------------------------------------------

  function fromScript(el) {
    var source = document.getElementById(el.dataset.figure);
    if (!source) {
      setPending(el, "Figure data missing.");
      return;
    }
    try {
      show(el, JSON.parse(source.textContent));
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
          show(el, body.figure);
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

  // --- when ----------------------------------------------------------------------------

  function near(el) {
    var s = state(el);
    if (!s.near) {
      s.near = true;
      loadPlotly().catch(function () {});  // fetched and parsed while the page paints
      schedule(el);
    }
  }

  function watch() {
    if (!("IntersectionObserver" in window)) {
      elements.forEach(near);
      return;
    }
    var observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        if (entry.isIntersecting) {
          observer.unobserve(entry.target);
          near(entry.target);
        }
      });
    }, { rootMargin: NEAR_PX + "px 0px" });
    elements.forEach(function (el) { observer.observe(el); });
  }

  function redrawAll() {
    elements.forEach(function (el) {
      if (state(el).drawn) {
        drawNow(el);
      }
    });
  }

  // Paper is light, and every figure is on it: draw those still waiting, synchronously
  // enough for the print layout (plotly builds its SVG before its promise resolves).
  function beforePrint() {
    printing = true;
    if (typeof Plotly === "undefined") {
      return;
    }
    elements.forEach(function (el) {
      var s = state(el);
      s.near = true;
      if (s.figure) {
        drawNow(el);
      }
    });
  }

  function afterPrint() {
    printing = false;
    if (scheme() !== "light") {
      redrawAll();
    }
  }

  function init() {
    elements = Array.prototype.slice.call(
      document.querySelectorAll("[data-figure], [data-figure-url]")
    );
    if (!elements.length) {
      return;
    }
    elements.forEach(function (el) {
      if (!el.classList.contains("pending")) {
        setPending(el, el.getAttribute("aria-label") || "Figure");
      }
      if (el.dataset.figure) {
        fromScript(el);
      } else {
        fromUrl(el, FIRST_DELAY_MS);
      }
    });
    watch();
    if (window.matchMedia) {
      var query = window.matchMedia(DARK);
      if (query.addEventListener) {
        query.addEventListener("change", redrawAll);
      }
    }
    window.addEventListener("beforeprint", beforePrint);
    window.addEventListener("afterprint", afterPrint);
    // plotly.js ready for the figures further down (and for printing) once the page rests.
    var idle = window.requestIdleCallback || function (callback) {
      return window.setTimeout(callback, 1000);
    };
    var preload = function () {
      idle(function () { loadPlotly().catch(function () {}); }, { timeout: 5000 });
    };
    if (document.readyState === "complete") {
      preload();
    } else {
      window.addEventListener("load", preload);
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
