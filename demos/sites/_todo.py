"""todo.example: a self-contained TodoMVC (vanilla JS, ``localStorage``), seeded with
eight rows on first load; the page the TodoMVC persistence check drives."""

from __future__ import annotations

import json

from demos.sites._attacks import attack_pages
from session_keeper.testing import RecordedRequest, SiteResponse

__all__ = ["TODO_SEED", "todo_site"]

#: The eight rows the TodoMVC page starts with: (text, completed).
TODO_SEED: tuple[tuple[str, bool], ...] = (
    ("Buy milk", False),
    ("Pay electricity bill", True),
    ("Call the plumber", False),
    ("Renew passport", False),
    ("Book dentist appointment", True),
    ("Water the plants", False),
    ("Return library books", False),
    ("Write quarterly report", True),
)

_TODO_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>TodoMVC</title>
<style>
body { font: 14px sans-serif; background: #f5f5f5; }
.todoapp { background: #fff; margin: 40px auto; width: 550px; }
.new-todo { width: 100%; font-size: 20px; padding: 12px; box-sizing: border-box; }
.todo-list { list-style: none; margin: 0; padding: 0; }
.todo-list li { border-bottom: 1px solid #ededed; padding: 10px; }
.todo-list li.completed label { text-decoration: line-through; color: #949494; }
</style></head>
<body>
<section class="todoapp">
  <header class="header"><h1>todos</h1>
    <input class="new-todo" placeholder="What needs to be done?" autofocus>
  </header>
  <section class="main"><ul class="todo-list"></ul></section>
  <footer class="footer"><span class="todo-count"></span></footer>
</section>
<script>
(function () {
  "use strict";
  var KEY = "todos-vanillajs";
  var SEED = __SEED__;
  function load() {
    var raw = localStorage.getItem(KEY);
    if (raw === null) {
      var seeded = SEED.map(function (row, i) {
        return { id: i + 1, title: row[0], completed: row[1] };
      });
      localStorage.setItem(KEY, JSON.stringify(seeded));
      return seeded;
    }
    return JSON.parse(raw);
  }
  var todos = load();
  function save() { localStorage.setItem(KEY, JSON.stringify(todos)); }
  var list = document.querySelector(".todo-list");
  function render() {
    list.textContent = "";
    todos.forEach(function (todo) {
      var li = document.createElement("li");
      li.dataset.id = String(todo.id);
      if (todo.completed) { li.className = "completed"; }
      var view = document.createElement("div");
      view.className = "view";
      var toggle = document.createElement("input");
      toggle.className = "toggle";
      toggle.type = "checkbox";
      toggle.checked = todo.completed;
      toggle.addEventListener("change", function () {
        todo.completed = toggle.checked; save(); render();
      });
      var label = document.createElement("label");
      label.textContent = todo.title;
      var destroy = document.createElement("button");
      destroy.className = "destroy";
      destroy.addEventListener("click", function () {
        todos = todos.filter(function (t) { return t !== todo; }); save(); render();
      });
      view.appendChild(toggle); view.appendChild(label); view.appendChild(destroy);
      li.appendChild(view);
      list.appendChild(li);
    });
    var left = todos.filter(function (t) { return !t.completed; }).length;
    var count = document.querySelector(".todo-count");
    count.textContent = left + (left === 1 ? " item left" : " items left");
  }
  document.querySelector(".new-todo").addEventListener("keydown", function (event) {
    if (event.key !== "Enter") { return; }
    var title = event.target.value.trim();
    if (!title) { return; }
    var next = todos.reduce(function (m, t) { return Math.max(m, t.id); }, 0) + 1;
    todos.push({ id: next, title: title, completed: false });
    event.target.value = "";
    save(); render();
  });
  render();
})();
</script>
</body></html>
"""


def todo_site(request: RecordedRequest) -> SiteResponse | None:
    """TodoMVC at ``/``; the attack pages (a second site for the Guard's cross-site frames)."""
    attack = attack_pages(request)
    if attack is not None:
        return attack
    if request.path in ("/", "/index.html") and request.method == "GET":
        seed = json.dumps([[text, done] for text, done in TODO_SEED])
        return SiteResponse(status=200, headers=(), body=_TODO_HTML.replace("__SEED__", seed))
    return None  # LocalSites answers /redirect, and 404 for the rest
