/*
 * The top bar's menu at phone width: a button that folds the layer links and the account
 * links away and opens them again (aria-expanded says which). Without this script the menu
 * is simply shown, wrapped; the stylesheet folds it only once `.collapsible` is set here.
 * No inline script or style: the Content-Security-Policy allows neither.
 */
(function () {
  "use strict";

  function init() {
    var bar = document.getElementById("topbar");
    var toggle = bar && bar.querySelector(".nav-toggle");
    if (!toggle) {
      return;
    }
    bar.classList.add("collapsible");

    function set(open) {
      bar.classList.toggle("open", open);
      toggle.setAttribute("aria-expanded", open ? "true" : "false");
    }

    toggle.addEventListener("click", function () {
      set(toggle.getAttribute("aria-expanded") !== "true");
    });
    document.addEventListener("keydown", function (event) {
      if (event.key === "Escape" && toggle.getAttribute("aria-expanded") === "true") {
        set(false);
        toggle.focus();
      }
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
