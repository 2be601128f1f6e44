// The labelling queue's keys, as the terminal tool has them (calibration/label.py):
// r/a/o/u or 1-4 label, s skip, z undo, ? the guide. Each key presses the button that
// names it in `data-keys`, so the page works the same with the mouse or without script.
(function () {
  "use strict";
  function typing(target) {
    return target && (target.isContentEditable ||
      ["INPUT", "TEXTAREA", "SELECT"].indexOf(target.tagName) !== -1);
  }
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) {
      return;
    }
    if (event.key === "?") {
      var guide = document.getElementById("guide");
      if (guide) {
        guide.open = !guide.open;
        event.preventDefault();
      }
      return;
    }
    var buttons = document.querySelectorAll("button[data-keys]");
    for (var i = 0; i < buttons.length; i += 1) {
      if (buttons[i].dataset.keys.split(" ").indexOf(event.key) !== -1) {
        event.preventDefault();
        buttons.forEach(function (b) { b.disabled = b !== buttons[i]; });
        buttons[i].click();
        return;
      }
    }
  });
})();
