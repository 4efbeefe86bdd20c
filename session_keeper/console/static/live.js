// The live view: draw the tab's screencast frames; send the person's mouse, keys and paste.
(function () {
  "use strict";
  var screen = document.getElementById("screen");
  var status = document.getElementById("status");
  var proto = location.protocol === "https:" ? "wss://" : "ws://";
  var ws = new WebSocket(proto + location.host + screen.dataset.ws);
  var size = { width: 0, height: 0 };
  var frames = 0;

  ws.onmessage = function (ev) {
    var msg = JSON.parse(ev.data);
    if (msg.type === "frame") {
      screen.src = "data:image/jpeg;base64," + msg.data;
      size.width = msg.width; size.height = msg.height;
      screen.dataset.deviceWidth = msg.width;
      screen.dataset.deviceHeight = msg.height;
      frames += 1;
      screen.dataset.frames = String(frames);
      status.textContent = "live: " + (msg.url || "");
    } else if (msg.type === "pages") {
      showPages(msg.pages, msg.shown);
    } else if (msg.type === "error") {
      status.textContent = msg.message;
    }
  };

  // The conversation's tab and its popups (an SSO window): one button each; the shown
  // one is pressed. A popup is shown as it opens, the tab again when it closes.
  var pagesBar = document.getElementById("pages");
  function showPages(pages, shown) {
    pagesBar.textContent = "";
    screen.dataset.shown = shown;
    pages.forEach(function (p) {
      var b = document.createElement("button");
      b.type = "button";
      b.dataset.page = p.id;
      b.dataset.kind = p.kind;
      b.setAttribute("aria-pressed", p.id === shown ? "true" : "false");
      b.textContent = (p.kind === "sign-in" ? "sign-in page: " : "popup: ") + (p.url || "");
      b.addEventListener("click", function () { send({ type: "show", page: p.id }); screen.focus(); });
      pagesBar.appendChild(b);
    });
  }
  ws.onclose = function () { status.textContent = "disconnected: reload the page to reconnect"; };

  function send(msg) { if (ws.readyState === 1) { ws.send(JSON.stringify(msg)); } }
  function modifiers(e) {
    return (e.altKey ? 1 : 0) | (e.ctrlKey ? 2 : 0) | (e.metaKey ? 4 : 0) | (e.shiftKey ? 8 : 0);
  }
  function point(e) {
    var r = screen.getBoundingClientRect();
    var sx = size.width ? size.width / r.width : 1;
    var sy = size.height ? size.height / r.height : 1;
    return { x: Math.max(0, (e.clientX - r.left) * sx), y: Math.max(0, (e.clientY - r.top) * sy) };
  }
  var buttons = ["left", "middle", "right"];
  function mouse(action, e, clicks) {
    var p = point(e);
    send({ type: "mouse", action: action, x: p.x, y: p.y,
           button: action === "mouseMoved" ? "none" : (buttons[e.button] || "left"),
           clickCount: clicks, modifiers: modifiers(e) });
  }
  screen.addEventListener("mousedown", function (e) { e.preventDefault(); screen.focus(); mouse("mousePressed", e, e.detail || 1); });
  screen.addEventListener("mouseup", function (e) { e.preventDefault(); mouse("mouseReleased", e, e.detail || 1); });
  var lastMove = 0;
  screen.addEventListener("mousemove", function (e) {
    var now = Date.now();
    if (now - lastMove > 50) { lastMove = now; mouse("mouseMoved", e, 0); }
  });
  screen.addEventListener("wheel", function (e) {
    e.preventDefault();
    var p = point(e);
    send({ type: "mouse", action: "mouseWheel", x: p.x, y: p.y, deltaX: e.deltaX, deltaY: e.deltaY, modifiers: modifiers(e) });
  }, { passive: false });
  screen.addEventListener("contextmenu", function (e) { e.preventDefault(); });
  screen.addEventListener("dragstart", function (e) { e.preventDefault(); });

  function keyText(e) {
    if (e.ctrlKey || e.metaKey || e.altKey) { return ""; }
    if (e.key.length === 1) { return e.key; }
    if (e.key === "Enter") { return "\r"; }
    return "";
  }
  screen.addEventListener("keydown", function (e) {
    // Ctrl/Cmd+V is left to the browser so that the paste event below fires.
    if ((e.ctrlKey || e.metaKey) && (e.key === "v" || e.key === "V")) { return; }
    e.preventDefault();
    send({ type: "key", action: "keyDown", key: e.key, code: e.code, keyCode: e.keyCode,
           text: keyText(e), modifiers: modifiers(e) });
  });
  screen.addEventListener("keyup", function (e) {
    if ((e.ctrlKey || e.metaKey) && (e.key === "v" || e.key === "V")) { return; }
    e.preventDefault();
    send({ type: "key", action: "keyUp", key: e.key, code: e.code, keyCode: e.keyCode, modifiers: modifiers(e) });
  });
  document.addEventListener("paste", function (e) {
    if (document.activeElement !== screen) { return; }
    e.preventDefault();
    var text = (e.clipboardData || window.clipboardData).getData("text");
    if (text) { send({ type: "paste", text: text }); }
  });
})();
