"""The Neovim plugin in a real Neovim inside tmux, typed at with send-keys, read with capture-pane.

A user's init.lua: the plugin on the runtimepath, setup() with this checkout's daemon, the
statusline showing the context usage. Then :SessiondOpen, :SessiondCompact and
:SessiondTree (the picker, a user message, a summary of the branch left), each screen kept
in tests/ui/out/.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .support import (
    COMPACTION_SETTINGS,
    REPO,
    copy_sample,
    private_env,
    replace_block,
    update_images,
    venv,
    wait_for,
)

WIDTH, HEIGHT = 100, 30
USAGE = re.compile(r"ctx (\d+)% (\d+(?:\.\d)?k?)/(\d+(?:\.\d)?[kM]?)")
# What Neovim shows when something went wrong: a Lua error, an E-numbered message, a
# traceback, or the plugin's own error notifications (vim.notify at ERROR is red, but the
# text is what the test can read).
ERRORS = re.compile(r"E\d{2,4}:|stack traceback|Error executing|sessiond: .*(failed|error)", re.I)

INIT = """
vim.opt.runtimepath:prepend({plugin!r})
vim.o.laststatus = 2
vim.o.statusline = '%f %m%=%{{v:lua.require("sessiond").statusline()}}  %l:%c '
require('sessiond').setup({{
  cmd = {{ {sessiond!r}, 'serve', '--stdio', '--log-level', 'WARNING' }},
  settings = {{ compaction = {{ keepRecentTokens = {keep} }} }},
}})
"""


@dataclass
class Terminal:
    socket: str
    screens: list[tuple[str, str]] = field(default_factory=list)

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        return done.stdout

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "ui", "-l", text)

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "ui", *keys)

    def command(self, text: str) -> None:
        self.type(f":{text}")
        self.keys("Enter")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "ui")

    def keep(self, name: str) -> str:
        text = self.screen()
        self.screens.append((name, text))
        return text

    def status_line(self) -> str:
        # The last window's statusline is the line above the command line.
        return self.screen().splitlines()[-2] if self.screen().count("\n") >= 2 else ""

    def wait(self, what: str, pattern: str | re.Pattern[str], timeout: float = 60) -> re.Match[str]:
        regex = re.compile(pattern, re.M) if isinstance(pattern, str) else pattern

        def probe() -> re.Match[str] | None:
            text = self.screen()
            error = ERRORS.search(text)
            assert error is None, f"error on screen while waiting for {what}:\n{text}"
            return regex.search(text)

        try:
            return wait_for(what, probe, timeout)
        except AssertionError as error:
            raise AssertionError(f"{error}; the screen:\n{self.screen()}") from None


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    nvim = venv() / "bin" / "nvim"
    assert nvim.exists(), "clients/nvim/run-tests.sh installs nvim into the venv"
    init = tmp_path / "init.lua"
    init.write_text(
        INIT.format(
            plugin=str(REPO / "clients" / "nvim"),
            sessiond=str(venv() / "bin" / "sessiond"),
            keep=COMPACTION_SETTINGS["compaction"]["keepRecentTokens"],
        )
    )
    env = private_env(tmp_path / "env")
    env["TERM"] = "xterm-256color"
    socket = f"sessiond-ui-{tmp_path.name}"
    term = Terminal(socket)
    subprocess.run(
        [
            "tmux",
            "-L",
            socket,
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "ui",
            "-x",
            str(WIDTH),
            "-y",
            str(HEIGHT),
            "-c",
            str(tmp_path),
            str(nvim),
            "-u",
            str(init),
            "-i",
            "NONE",
            "-n",
        ],
        env=env,
        check=True,
        timeout=30,
    )
    try:
        yield term
    finally:
        subprocess.run(
            ["tmux", "-L", socket, "kill-server"], check=False, capture_output=True, timeout=30
        )


def _pick(term: Terminal, prompt: str, choose: re.Pattern[str]) -> tuple[str, list[str]]:
    """Answers an inputlist (vim.ui.select's default), paging through '-- More --'.
    Returns its last page (the leaf is at the end of the list) and every item line seen."""
    # A list longer than the screen scrolls its prompt away before the first "-- More --".
    term.wait(f"the picker {prompt!r}", rf"{re.escape(prompt)}|^1: ")
    items: list[str] = []
    chosen: str | None = None

    def page() -> str | None:
        text = term.screen()
        return text if "-- More --" in text or "Type number" in text else None

    for _ in range(20):
        text = wait_for("a page of the picker", page)
        for line in text.splitlines():
            item = re.match(r"\s*(\d+): (.*)", line)
            if item and line not in items:
                items.append(line)
                if chosen is None and choose.search(item.group(2)):
                    chosen = item.group(1)
        if "Type number" in text:
            break
        term.keys("Space")
        # The next page, not this one again: a second Space would skip a page.
        wait_for("the next page", lambda previous=text: term.screen() != previous)
    assert chosen is not None, "\n".join(items)
    term.type(chosen)
    term.keys("Enter")
    return text, items


def test_nvim_plugin_in_tmux(terminal: Terminal, tmp_path: Path, out_dir: Path) -> None:
    session = copy_sample(tmp_path / "project")
    term = terminal
    term.wait("Neovim to start", r"^~", timeout=30)

    term.command(f"SessiondOpen {session}")
    opened = term.wait("the context usage in the statusline", USAGE)
    term.wait("the open notice", r"sessiond: opened .*sample-session\.jsonl \(\d+ entries\)")
    term.keep("opened")
    before = opened.group(0)

    term.command("SessiondCompact")
    term.wait("the compaction notice", r"sessiond: compacted: \S+ -> \S+ tokens", timeout=90)
    after = term.wait("the statusline's new usage", USAGE).group(0)
    term.keep("compacted")
    assert after != before, (before, after)

    term.command("SessiondTree")
    picker, items = _pick(term, "sessiond: go to", re.compile(r"user: Now non-ASCII headings"))
    term.screens.append(("tree", picker))
    assert any("▶" in line for line in items), items
    assert any(re.search(r"\[[^\]]+\]", line) for line in items), items
    _pick(
        term,
        "sessiond: summarize the branch you leave?",
        re.compile(r"^Summarize the branch you leave$"),
    )
    term.wait("the branch summarized", r"^sessiond: moved to .*\(branch summarized\)$", timeout=90)
    assert "Press ENTER" not in term.screen(), term.screen()
    term.wait("the question in a scratch buffer", r"sessiond://editor/\d+")
    term.wait("the question's text", r"^Now non-ASCII headings")
    term.wait("the usage after navigating", USAGE)
    term.keep("navigated")

    term.command("messages")
    messages = term.keep("messages")
    assert ERRORS.search(messages) is None, messages
    for name, text in term.screens:
        (out_dir / f"nvim-{name}.txt").write_text(text)
    if update_images():
        screen = "\n".join(line.rstrip() for line in picker.splitlines()).strip("\n")
        images = REPO / "clients" / "nvim" / "images"
        images.mkdir(exist_ok=True)
        (images / "tree.txt").write_text(screen + "\n")
        for readme in (REPO / "README.md", REPO / "clients" / "nvim" / "README.md"):
            replace_block(readme, "nvim-screen", f"```\n{screen}\n```\n")
