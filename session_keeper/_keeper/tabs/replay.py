"""Replay: an opt-in recording of what each conversation's pages showed when it acted.

At each act of a conversation's tab (a navigation done, a click, a fill, typing, a key,
a choice) and each input of a person's live view, the page is captured as a DOM
snapshot: a copy of its document with scripts, frames, event handlers and links'
queries removed and **every form control's value masked** — done in the page, by the
snapshot script, so no typed value ever reaches Python. Each snapshot is kept as a
frame (its time, act, redacted URL, title, browser generation and the person, if one
acted) under a bounded retention: at most ``max_frames`` frames and ``max_bytes``
bytes per conversation, none older than ``max_age``. The console shows them, inertly,
beside the conversation's audit entries and Guard refusals.

Recording is off unless the keeper is given a :class:`Replay`: then nothing is added
to any page (no init script, no binding) and no act captures anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
from playwright.async_api import Error as PlaywrightError

from session_keeper._model.grants import check_name
from session_keeper._util.clock import Clock
from session_keeper._util.redact import redact_url, scrub_secrets, scrubbing_logger
from session_keeper.errors import InvalidArgument, InvalidArgumentType

__all__ = ["SNAPSHOT_SCRIPT", "Replay", "ReplayFrame", "ReplayRecorder"]

log = scrubbing_logger("session_keeper.replay")

#: What a masked control shows in a frame (the same whatever was typed: no length leaks).
MASK = "\u2022" * 6

#: The page-side snapshot: a masked, inert copy of the document (see the module).
SNAPSHOT_SCRIPT = r"""() => {
  const MASK = "%MASK%";
  const LABELS = new Set(["submit", "button", "reset", "image"]);
  const CONTROLS = "input, textarea, select, [contenteditable]";
  const live = Array.from(document.querySelectorAll(CONTROLS));
  const root = document.documentElement.cloneNode(true);
  const copies = Array.from(root.querySelectorAll(CONTROLS));
  copies.forEach((el, i) => {
    const was = live[i];
    const tag = el.localName;
    if (tag === "input") {
      const type = (el.getAttribute("type") || "text").toLowerCase();
      if (LABELS.has(type)) return;
      el.removeAttribute("checked");
      const filled = (was && was.value) || el.getAttribute("value");
      if (type === "checkbox" || type === "radio" || type === "hidden" || type === "file") {
        el.removeAttribute("value");
      } else if (filled) {
        el.setAttribute("value", MASK);
      } else {
        el.removeAttribute("value");
      }
    } else if (tag === "textarea") {
      el.textContent = (was && was.value) || el.textContent ? MASK : "";
    } else if (tag === "select") {
      for (const option of el.querySelectorAll("option")) option.removeAttribute("selected");
    } else if (el.getAttribute("contenteditable") !== "false") {
      el.textContent = el.textContent ? MASK : "";
    }
  });
  root.querySelectorAll(
    "script, noscript, iframe, frame, frameset, object, embed, applet, base, link, portal, " +
    "meta[http-equiv]"
  ).forEach((el) => el.remove());
  const STRIP = ["src", "srcset", "poster", "background", "data", "ping", "lowsrc"];
  const TRIM = ["href", "action", "formaction", "xlink:href", "cite"];
  for (const el of root.querySelectorAll("*")) {
    for (const attr of Array.from(el.attributes)) {
      const name = attr.name.toLowerCase();
      const value = attr.value.trim();
      if (name.startsWith("on")) {
        el.removeAttribute(attr.name);
      } else if (STRIP.includes(name) && !value.startsWith("data:")) {
        el.removeAttribute(attr.name);
      } else if (TRIM.includes(name)) {
        if (/^\s*(javascript|data|vbscript):/i.test(value)) el.removeAttribute(attr.name);
        else el.setAttribute(attr.name, value.split(/[?#]/)[0]);
      }
    }
  }
  let css = "";
  for (const sheet of Array.from(document.styleSheets)) {
    if (!sheet.ownerNode || sheet.ownerNode.localName !== "link") continue;
    try {
      for (const rule of Array.from(sheet.cssRules)) css += rule.cssText + "\n";
    } catch (e) {
      // A cross-origin sheet cannot be read: the frame goes without it.
    }
  }
  if (css) {
    const style = document.createElement("style");
    style.textContent = css;
    (root.querySelector("head") || root).appendChild(style);
  }
  return {html: "<!doctype html>" + root.outerHTML, title: document.title, url: location.href};
}""".replace("%MASK%", MASK)


def _positive_int(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    what = f"{type(instance).__name__}.{attribute.name}"
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentType(f"{what} must be an int, not {type(value).__name__}")
    if value <= 0:
        raise InvalidArgument(f"{what} must be positive")


def _positive_age(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, timedelta):
        raise InvalidArgumentType(f"Replay.max_age must be a timedelta, not {type(value).__name__}")
    if value <= timedelta(0):
        raise InvalidArgument("Replay.max_age must be positive")


@attrs.frozen(kw_only=True)
class Replay:
    """Record each conversation's pages as masked DOM snapshots (opt-in; see the docs).

    ``directory``: where the frames are kept (one sub-directory per conversation).
    ``max_frames`` / ``max_bytes``: the most a conversation keeps; the oldest frames go
    first. ``max_age``: frames older than this are removed (on the conversation's next
    frame, when it is read, and by the keeper's sweep). ``max_frame_bytes``: a bigger
    snapshot is kept as a note saying so (it must not exceed ``max_bytes``). Bad values raise
    :class:`~session_keeper.errors.InvalidArgument` (or ``InvalidArgumentType``).

    >>> Replay(directory="/var/lib/agent/replay", max_frames=50)
    Replay(directory=PosixPath('/var/lib/agent/replay'), max_frames=50, max_bytes=20000000, max_age=datetime.timedelta(days=7), max_frame_bytes=2000000)
    """  # noqa: E501 -- a doctest line is as long as the repr it shows

    directory: Path = attrs.field(converter=Path)
    max_frames: int = attrs.field(default=200, validator=_positive_int)
    max_bytes: int = attrs.field(default=20_000_000, validator=_positive_int)
    max_age: timedelta = attrs.field(default=timedelta(days=7), validator=_positive_age)
    max_frame_bytes: int = attrs.field(default=2_000_000, validator=_positive_int)

    def __attrs_post_init__(self) -> None:
        if self.max_frame_bytes > self.max_bytes:
            # Else one frame could push out every other and still not fit.
            raise InvalidArgument("Replay.max_frame_bytes must not exceed max_bytes")


@attrs.frozen(kw_only=True)
class ReplayFrame:
    """One recorded snapshot of a conversation's page (its DOM is read separately).

    ``act``: what happened just before (``goto``, ``click``, ``fill``, ``live:click``...);
    ``url``: the page's URL without query or fragment; ``by``: the person whose live-view
    input it was (``None``: the conversation's own act); ``popup``: a popup of the
    conversation rather than its tab; ``size``: the snapshot's bytes.
    """

    conversation: str
    seq: int
    at: datetime
    act: str
    url: str
    title: str
    generation: int
    by: str | None = None
    popup: bool = False
    size: int = 0


def _frame_data(frame: ReplayFrame) -> dict[str, object]:
    return {**attrs.asdict(frame), "at": frame.at.isoformat()}


#: Modes of the replay's directories and frame files: the keeper's user alone.
_PRIVATE_DIR = 0o700
_PRIVATE_FILE = 0o600


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` as a file only its owner can read (0600, umask aside)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, _PRIVATE_FILE)
    try:
        os.fchmod(fd, _PRIVATE_FILE)  # an older frame's file may have been wider
        with os.fdopen(fd, "wb", closefd=False) as f:
            f.write(data)
    finally:
        os.close(fd)


def _frame_of(data: dict[str, Any]) -> ReplayFrame:
    return ReplayFrame(**{**data, "at": datetime.fromisoformat(data["at"])})


class ReplayRecorder:
    """The frames of every conversation, under :class:`Replay`'s bounds (one per keeper).

    :meth:`capture` takes a snapshot of a page; :meth:`frames` and :meth:`dom` read them
    back (the console does). A capture never fails the act it follows: a page that
    navigates away or closes meanwhile is simply not recorded.
    """

    def __init__(self, settings: Replay, clock: Clock) -> None:
        self.settings = settings
        self._clock = clock
        self._index: dict[str, list[ReplayFrame]] = {}
        self._lock = asyncio.Lock()

    def _dir(self, conversation: str) -> Path:
        # A conversation id may hold "/" or "..": its directory is named by a digest.
        digest = hashlib.sha256(conversation.encode()).hexdigest()[:32]
        return self.settings.directory / digest

    def _load(self, conversation: str) -> list[ReplayFrame]:
        frames = self._index.get(conversation)
        if frames is None:
            frames = []
            where = self._dir(conversation)
            if where.is_dir():
                for meta in sorted(where.glob("*.json")):
                    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
                        frames.append(_frame_of(json.loads(meta.read_text())))
            self._index[conversation] = frames
        return frames

    def _drop(self, frame: ReplayFrame) -> None:
        where = self._dir(frame.conversation)
        for suffix in (".json", ".html"):
            (where / f"{frame.seq:010d}{suffix}").unlink(missing_ok=True)

    def _retain(self, conversation: str) -> int:
        """Apply the bounds to ``conversation``'s frames; return how many went."""
        frames = self._load(conversation)
        oldest = self._clock.now() - self.settings.max_age
        keep = [f for f in frames if f.at >= oldest]
        total = sum(f.size for f in keep)
        while keep and (len(keep) > self.settings.max_frames or total > self.settings.max_bytes):
            total -= keep.pop(0).size
        gone = [f for f in frames if f not in keep]
        for frame in gone:
            self._drop(frame)
        self._index[conversation] = keep
        if not keep:
            with contextlib.suppress(OSError):
                self._dir(conversation).rmdir()
        return len(gone)

    async def capture(
        self,
        page: Any,
        *,
        conversation: str,
        act: str,
        generation: int,
        by: str | None = None,
        popup: bool = False,
    ) -> ReplayFrame | None:
        """Snapshot ``page`` (a Playwright page) after ``act``; ``None`` if it could not be read."""
        snap = await _snapshot(page)
        if snap is None:
            return None
        html = scrub_secrets(str(snap.get("html") or ""))
        title = scrub_secrets(str(snap.get("title") or ""))[:300]
        url = redact_url(str(snap.get("url") or "")) or ""
        if len(html.encode()) > self.settings.max_frame_bytes:
            html = (
                "<!doctype html><title>frame too large</title>"
                f"<p>The snapshot was over {self.settings.max_frame_bytes} bytes.</p>"
            )
        body = html.encode()
        async with self._lock:
            frames = self._load(conversation)
            frame = ReplayFrame(
                conversation=conversation,
                seq=frames[-1].seq + 1 if frames else 1,
                at=self._clock.now(),
                act=act,
                url=url,
                title=title,
                generation=generation,
                by=by,
                popup=popup,
                size=len(body),
            )
            try:
                await asyncio.to_thread(self._write, frame, body)
            except OSError as exc:
                # A recording that cannot be written does not stop the act it follows.
                log.warning("replay: a frame could not be written: %s", type(exc).__name__)
                return None
            frames.append(frame)
            self._retain(conversation)
        return frame

    def _write(self, frame: ReplayFrame, body: bytes) -> None:
        # Frames show signed-in pages: only the keeper's user may list or read them,
        # whatever the process's umask (as for key and token files).
        root = self.settings.directory
        if not root.is_dir():
            root.mkdir(mode=_PRIVATE_DIR, parents=True, exist_ok=True)
            root.chmod(_PRIVATE_DIR)
        where = self._dir(frame.conversation)
        where.mkdir(mode=_PRIVATE_DIR, exist_ok=True)
        if where.stat().st_mode & 0o777 != _PRIVATE_DIR:
            where.chmod(_PRIVATE_DIR)
        stem = f"{frame.seq:010d}"
        _write_private(where / f"{stem}.html", body)
        _write_private(where / f"{stem}.json", json.dumps(_frame_data(frame)).encode())

    async def frames(self, conversation: str) -> tuple[ReplayFrame, ...]:
        """``conversation``'s frames inside the bounds, oldest first."""
        conversation = check_name(conversation, "conversation")
        async with self._lock:
            self._retain(conversation)
            return tuple(self._index[conversation])

    async def dom(self, conversation: str, seq: int) -> str | None:
        """The masked snapshot of frame ``seq`` of ``conversation`` (``None``: no such frame)."""
        frames = await self.frames(conversation)
        if not any(f.seq == seq for f in frames):
            return None
        path = self._dir(conversation) / f"{seq:010d}.html"
        try:
            return (await asyncio.to_thread(path.read_bytes)).decode()
        except OSError:
            return None

    async def prune(self) -> int:
        """Remove every conversation's frames past the age bound; return how many went."""
        async with self._lock:
            gone = 0
            for conversation in list(self._index):
                gone += self._retain(conversation)
            root = self.settings.directory
            if root.is_dir():
                known = {self._dir(c).name for c in self._index}
                for where in root.iterdir():
                    if where.is_dir() and where.name not in known:
                        gone += self._prune_unindexed(where)
            return gone

    def _prune_unindexed(self, where: Path) -> int:
        """A conversation this process has not read yet (an earlier process's frames)."""
        oldest = self._clock.now() - self.settings.max_age
        gone = 0
        for meta in where.glob("*.json"):
            try:
                at = datetime.fromisoformat(json.loads(meta.read_text())["at"])
            except (OSError, ValueError, TypeError, KeyError):
                continue
            if at < oldest:
                meta.unlink(missing_ok=True)
                meta.with_suffix(".html").unlink(missing_ok=True)
                gone += 1
        if not any(where.iterdir()):
            shutil.rmtree(where, ignore_errors=True)
        return gone

    def __repr__(self) -> str:
        return f"<ReplayRecorder {self.settings.directory}>"


async def _snapshot(page: Any) -> dict[str, Any] | None:
    """The page's masked snapshot; after a navigation in flight, once more when it is loaded."""
    for attempt in range(2):
        try:
            result = await page.evaluate(SNAPSHOT_SCRIPT)
        except PlaywrightError:
            if attempt or page.is_closed():
                log.debug("replay: the page could not be read; no frame")
                return None
            with contextlib.suppress(PlaywrightError):
                await page.wait_for_load_state("domcontentloaded", timeout=5_000)
            continue
        return result if isinstance(result, dict) else None
    return None
