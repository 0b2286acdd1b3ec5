// The findings page's bulk bar: "select all on this page", how many are ticked, and the
// silence's duration shown only for a silence. Without this script the checkboxes and the
// form still work; only the shortcuts are missing.
(function () {
  "use strict";
  var form = document.getElementById("bulk-form");
  if (!form) {
    return;
  }
  var all = document.getElementById("bulk-select-all");
  var count = document.getElementById("bulk-count");
  var action = form.querySelector("select[name=action]");
  var hours = document.getElementById("bulk-hours");
  function boxes() {
    return Array.prototype.slice.call(document.querySelectorAll("input.bulk-select"));
  }
  function update() {
    var ticked = boxes().filter(function (b) { return b.checked; }).length;
    var total = boxes().length;
    count.textContent = ticked ? ticked + " of " + total + " ticked" : "";
    all.checked = total > 0 && ticked === total;
    all.indeterminate = ticked > 0 && ticked < total;
  }
  function showHours() {
    hours.hidden = action.value !== "silence";
  }
  all.addEventListener("change", function () {
    boxes().forEach(function (b) { b.checked = all.checked; });
    update();
  });
  document.addEventListener("change", function (e) {
    if (e.target.classList && e.target.classList.contains("bulk-select")) {
      update();
    }
  });
  action.addEventListener("change", showHours);
  showHours();
  update();
})();
