/*
 * Copy buttons: each `.command` item's button puts the text of its `code` on the clipboard,
 * and says so in the box's status line. No inline script or handler: the
 * Content-Security-Policy allows neither. Where the clipboard API is refused (a page served
 * over plain HTTP from another host), the command is selected for the person to copy.
 */
(function () {
  "use strict";

  function select(code) {
    var range = document.createRange();
    range.selectNodeContents(code);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  function say(button, text) {
    var box = button.closest(".commands");
    var status = box && box.querySelector(".copy-status");
    if (status) {
      status.textContent = text;
    }
  }

  function copied(button) {
    button.textContent = "Copied";
    button.classList.add("done");
    say(button, "Copied to the clipboard.");
    window.setTimeout(function () {
      button.textContent = "Copy";
      button.classList.remove("done");
    }, 2000);
  }

  function copy(button) {
    var item = button.closest(".command");
    var code = item && item.querySelector("code");
    if (!code) {
      return;
    }
    var text = code.textContent;
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(
        function () {
          copied(button);
        },
        function () {
          select(code);
          say(button, "Selected: press Ctrl+C (or Cmd+C) to copy.");
        }
      );
    } else {
      select(code);
      say(button, "Selected: press Ctrl+C (or Cmd+C) to copy.");
    }
  }

  function init() {
    document.addEventListener("click", function (event) {
      var button = event.target.closest && event.target.closest(".command button.copy");
      if (button) {
        copy(button);
      }
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
