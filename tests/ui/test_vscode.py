"""The packaged VS Code extension in a real VS Code (code-server), driven through Chromium.

What a user does: open the sample session from the command palette, read the Agent Session
view and the status bar, compact, navigate to a user message with a summary of the branch
left, and watch the view follow a line another program appends to the file. Every step is
a screenshot in tests/ui/out/; any error notification or extension-host error fails it.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from .conftest import CodeServer
from .support import REPO, USAGE, copy_sample, update_images, wait_for

# Every notification the workbench shows, recorded as it appears: toasts fade, and an error
# that came and went between two looks must still fail the test.
RECORD_NOTIFICATIONS = """
window.__notifications = [];
new MutationObserver(() => {
  for (const item of document.querySelectorAll('.notification-list-item')) {
    const message = item.querySelector('.notification-list-item-message');
    if (!message) continue;
    const icon = item.querySelector('.notification-list-item-icon');
    const severity = icon && icon.className.includes('codicon-error') ? 'error'
      : icon && icon.className.includes('codicon-warning') ? 'warning' : 'info';
    const text = message.textContent;
    if (!window.__notifications.some((n) => n.text === text && n.severity === severity))
      window.__notifications.push({ severity, text });
  }
}).observe(document, { childList: true, subtree: true });
"""

# The rows of the Agent Session view as the user sees them.
READ_TREE = """
() => {
  const pane = [...document.querySelectorAll('.pane')].find((p) =>
    p.querySelector('.pane-header')?.textContent.includes('Agent Session'));
  if (!pane) return null;
  return [...pane.querySelectorAll('.monaco-list-row')].map((row) => ({
    label: row.querySelector('.label-name')?.textContent ?? '',
    description: row.querySelector('.label-description')?.textContent ?? '',
    icon: row.querySelector('.custom-view-tree-node-item-icon')?.className ?? '',
    level: Number(row.getAttribute('aria-level')),
    expanded: row.getAttribute('aria-expanded'),
  }));
}
"""


class Workbench:
    def __init__(self, page: Page, out: Path):
        self.page = page
        self.out = out
        self.shots: list[Path] = []

    def shot(self, name: str) -> Path:
        # A tooltip under the pointer would hide rows of the tree.
        self.page.mouse.move(1000, 600)
        path = self.out / f"vscode-{len(self.shots) + 1:02d}-{name}.png"
        self.page.screenshot(path=str(path))
        self.shots.append(path)
        return path

    def notifications(self) -> list[dict[str, str]]:
        result: list[dict[str, str]] = self.page.evaluate("window.__notifications")
        return result

    def errors(self) -> list[str]:
        return [n["text"] for n in self.notifications() if n["severity"] == "error"]

    def wait_notification(self, pattern: str, timeout: float = 90) -> str:
        def found() -> str | None:
            errors = self.errors()
            assert not errors, f"error notifications: {errors}"
            for n in self.notifications():
                if re.search(pattern, n["text"]):
                    return n["text"]
            return None

        return wait_for(f"a notification matching {pattern!r}", found, timeout)

    def run_command(self, title: str) -> None:
        """The command palette, as a user opens it (F1), and the command picked by its title.
        Until the extension host has registered the extension's contributions the palette
        does not list its commands, so the palette is opened again until it does."""
        box = self.page.locator(".quick-input-widget input")
        row = self.page.locator(".quick-input-list .monaco-list-row", has_text=title).first

        def listed() -> bool:
            self.page.keyboard.press("Escape")
            self.page.keyboard.press("F1")
            box.wait_for(state="visible")
            box.fill(f">{title}")
            try:
                row.wait_for(state="visible", timeout=5_000)
            except PlaywrightTimeout:
                return False
            return True

        wait_for(f"the command {title!r} in the palette", listed, timeout=90)
        row.click()

    def tree(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] | None = self.page.evaluate(READ_TREE)
        return rows or []

    def wait_leaf(self, what: str, label_start: str) -> list[dict[str, Any]]:
        """The rows, once the leaf's row shows `label_start`."""

        def probe() -> list[dict[str, Any]] | None:
            rows = self.tree()
            leaf = _leaf(rows)
            return rows if leaf and leaf[0]["label"].startswith(label_start) else None

        return wait_for(what, probe)

    def status(self) -> str | None:
        for text in self.page.locator(".part.statusbar .statusbar-item").all_inner_texts():
            if USAGE.search(text):
                return text.strip()
        return None

    def tree_row(self, label_start: str) -> Any:
        pane = self.page.locator(
            ".pane", has=self.page.locator(".pane-header", has_text="Agent Session")
        )
        return pane.locator(".monaco-list-row", has_text=label_start).first


def _leaf(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if "← leaf" in r["description"]]


def _last_entry_id(session: Path) -> str:
    lines = session.read_bytes().splitlines()
    return str(json.loads(lines[-1])["id"])


def _extension_host_errors(logs: Path) -> list[str]:
    """Error lines the extension host and the extension's own output channel logged."""
    found: list[str] = []
    for log in logs.rglob("*.log"):
        relevant = "exthost" in str(log.relative_to(logs)) or "sessiond" in log.name
        if not relevant:
            continue
        for line in log.read_text(errors="replace").splitlines():
            if "[error]" in line:
                found.append(f"{log.name}: {line}")
    return found


def test_vscode_extension_in_code_server(code_server: CodeServer, out_dir: Path) -> None:
    session = copy_sample(code_server.workspace)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.add_init_script(RECORD_NOTIFICATIONS)
            console_errors: list[str] = []
            page.on("pageerror", lambda error: console_errors.append(str(error)))
            ui = Workbench(page, out_dir)
            page.goto(code_server.url, wait_until="domcontentloaded")
            page.locator(".monaco-workbench .part.statusbar").wait_for(timeout=90_000)
            page.locator(
                ".explorer-folders-view .monaco-list-row", has_text="sample-session.jsonl"
            ).wait_for(timeout=90_000)

            # Open Session…: this workspace has no sessions of its own in the daemon's
            # directory, so the file is chosen with the editor's own file dialog.
            ui.run_command("sessiond: Open Session…")
            ui.page.locator(
                ".quick-input-list .monaco-list-row", has_text="Browse for a session file"
            ).click()
            path_box = page.locator(".quick-input-widget input")
            wait_for("the file dialog", lambda: path_box.input_value().startswith("/"))
            path_box.fill(str(session))
            page.keyboard.press("Enter")

            # The view shares the Explorer with the files; give it the room a user would
            # (fold the folder, widen the side bar) so the screenshots show the tree.
            page.locator(".pane-header", has_text="project").first.click()
            sidebar = page.locator(".part.sidebar").bounding_box()
            assert sidebar is not None
            edge = sidebar["x"] + sidebar["width"]
            page.mouse.move(edge, sidebar["y"] + 300)
            page.mouse.down()
            page.mouse.move(edge + 260, sidebar["y"] + 300, steps=10)
            page.mouse.up()

            rows = wait_for("the session tree", lambda: ui.tree() if _leaf(ui.tree()) else None)
            usage_before = wait_for("the context usage in the status bar", ui.status)
            ui.shot("opened")
            leaf = _leaf(rows)
            assert len(leaf) == 1, rows
            labelled = [r for r in rows if r["label"].startswith("[")]
            assert labelled, f"no label shown: {rows}"
            assert "debug-stackframe" in leaf[0]["icon"]
            assert USAGE.search(usage_before)

            # Compact Session…: no instructions; the offline summarizer writes a compaction.
            ui.run_command("sessiond: Compact Session…")
            page.locator(".quick-input-widget input").wait_for(state="visible")
            page.keyboard.press("Enter")
            compacted = ui.wait_notification(r"^Compacted: ")
            after = ui.wait_leaf("a new compaction as the leaf", "compaction (")
            usage_after = wait_for(
                "the status bar to change",
                lambda: s if (s := ui.status()) and s != usage_before else None,
            )
            ui.shot("compacted")
            assert _leaf(after)[0]["label"] != leaf[0]["label"]
            assert usage_after != usage_before
            assert compacted

            # Navigate Here and Summarize the Branch Left, on the user message that opened
            # the branch the leaf is on (the one the Neovim test picks too).
            users = [
                r
                for r in ui.tree()
                if "codicon-account" in r["icon"]
                and r["label"].startswith("Now non-ASCII headings")
            ]
            assert users, ui.tree()
            question = users[0]["label"]
            ui.tree_row(question).click(button="right")
            page.get_by_role("menuitem", name="Navigate Here and Summarize the Branch Left").click()
            editor = page.locator(".editor-group-container .monaco-editor .view-lines").first
            first_words = question.rstrip("…")[:40]
            wait_for(
                "the question back in an editor",
                lambda: (
                    first_words in editor.inner_text().replace("\u00a0", " ")
                    if editor.count()
                    else None
                ),
                timeout=90,
            )
            navigated = ui.wait_leaf("a branch summary as the leaf", "branch summary")
            assert ui.errors() == []
            ui.shot("navigated")

            # Another program (pi, say) appends a user message under the leaf.
            line = {
                "type": "message",
                "id": "0ddba11a",
                "parentId": _last_entry_id(session),
                "timestamp": "2026-05-14T10:00:00.000Z",
                "message": {
                    "role": "user",
                    "content": "Also handle setext headings",
                    "timestamp": 1,
                },
            }
            with session.open("ab") as file:
                file.write(json.dumps(line).encode() + b"\n")
            appended = ui.wait_leaf(
                "the appended message in the view", "Also handle setext headings"
            )
            ui.shot("followed")
            assert _leaf(navigated)[0]["label"] != _leaf(appended)[0]["label"]

            assert ui.errors() == [], ui.notifications()
            assert console_errors == [], console_errors
        except BaseException as failure:
            # What the screen showed when it went wrong is the first thing to look at,
            # and an error the editor showed is most often why a step never finished.
            ui.shot("failed")
            errors = ui.errors()
            if errors:
                raise AssertionError(f"error notifications: {errors}") from failure
            raise
        finally:
            browser.close()
    assert _extension_host_errors(code_server.logs) == []
    if update_images():
        images = REPO / "clients" / "vscode" / "images"
        images.mkdir(exist_ok=True)
        shutil.copyfile(ui.shots[2], images / "agent-session.png")
