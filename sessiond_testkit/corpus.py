# ruff: noqa: E501  (log and code templates are data: long literals read better unwrapped)
"""Seeded text pools for the session generator: a small fictional project and its noise.

Generating prose or code per message would make a 100k-entry session take minutes, so the
generator builds these pools once per seed and then takes slices and samples from them.
The project is "ledgerline", a Python bookkeeping tool with a small TypeScript dashboard.
Some of its files hold CJK text, emoji and a literal ``<|endoftext|>`` so that readers of
the generated sessions meet them where real sessions have them: inside tool output.
"""

from __future__ import annotations

import base64
import struct
import zlib
from random import Random

CWD = "/home/dev/src/ledgerline"

PY_FILES = (
    "src/ledgerline/__init__.py",
    "src/ledgerline/cli.py",
    "src/ledgerline/importer.py",
    "src/ledgerline/parser.py",
    "src/ledgerline/money.py",
    "src/ledgerline/accounts.py",
    "src/ledgerline/reconcile.py",
    "src/ledgerline/config.py",
    "src/ledgerline/storage/sqlite.py",
    "src/ledgerline/storage/cache.py",
    "src/ledgerline/report/html.py",
    "src/ledgerline/report/csv_export.py",
    "src/ledgerline/utils/dates.py",
    "src/ledgerline/utils/text.py",
    "tests/conftest.py",
    "tests/test_importer.py",
    "tests/test_parser.py",
    "tests/test_money.py",
    "tests/test_reconcile.py",
    "tests/test_tokenizer_cases.py",
)
TS_FILES = (
    "web/src/App.tsx",
    "web/src/api/client.ts",
    "web/src/components/LedgerTable.tsx",
    "web/src/components/ImportDialog.tsx",
    "web/src/hooks/useLedger.ts",
)
DOC_FILES = (
    "README.md",
    "docs/CHANGELOG.md",
    "docs/架构.md",
    "notes/réunion-2026-03.md",
)
DATA_FILES = (
    "tests/fixtures/bank_export.csv",
    "tests/fixtures/tokenizer_cases.txt",
)
CONFIG_FILES = (
    "pyproject.toml",
    "web/package.json",
    "web/tsconfig.json",
    ".github/workflows/ci.yml",
    "Makefile",
)
IMAGE_FILES = ("docs/img/dashboard.png", "docs/img/import-error.png", "assets/logo.png")
SKILLS = ("python-testing", "git-workflow", "release-notes", "sql-migrations")

ALL_TEXT_FILES = PY_FILES + TS_FILES + DOC_FILES + DATA_FILES + CONFIG_FILES

_VERBS = (
    "parse", "load", "normalize", "reconcile", "import", "export", "resolve", "validate",
    "render", "merge", "split", "convert", "fetch", "compute", "apply", "collect", "format",
    "detect", "match", "flush", "rebuild", "migrate", "round", "summarize",
)  # fmt: skip
_NOUNS = (
    "entry", "entries", "account", "ledger", "amount", "row", "header", "currency",
    "statement", "balance", "posting", "journal", "rate", "cache", "record", "payee",
    "category", "period", "batch", "transaction", "delimiter", "encoding", "report",
)  # fmt: skip
_TYPES = ("Decimal", "str", "int", "list[Posting]", "dict[str, Account]", "Ledger", "None", "bool")
_ERRORS = (
    "ValueError", "KeyError", "ImportError", "LedgerError", "ParseError", "ReconcileError",
)  # fmt: skip
_CJK_COMMENTS = (
    "注意: 金额以分为单位存储",
    "银行导出的日期格式不一致",
    "この関数はキャッシュを更新します",
    "通貨コードは ISO 4217 に従う",
    "对账失败时保留原始记录",
)
_EMOJI = ("✅", "🐛", "🔧", "🚀", "⚠️", "📦", "🎉", "👀")
_MERCHANTS = (
    "ACME Hardware", "Café Lumière", "北京便利店", "スターバックス 渋谷", "Müller GmbH",
    "Uber *TRIP", "AMZN Mktp", "Netflix.com", "Société Générale", "🍕 Pizza Planet",
)  # fmt: skip


def _ident(rng: Random) -> str:
    return f"{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}"


def _camel(rng: Random) -> str:
    return rng.choice(_VERBS) + rng.choice(_NOUNS).capitalize()


def _py_file(rng: Random, path: str, target: int) -> str:
    mod = path.rsplit("/", 1)[-1].removesuffix(".py")
    out = [f'"""{mod}: {rng.choice(_VERBS)} and {rng.choice(_VERBS)} ledger {mod} data."""', ""]
    out += [
        "from __future__ import annotations",
        "",
        "import logging",
        "from decimal import Decimal",
    ]
    out += ["", "logger = logging.getLogger(__name__)", ""]
    size = sum(len(x) + 1 for x in out)
    while size < target:
        name = _ident(rng)
        args = ", ".join(rng.sample(_NOUNS, rng.randint(1, 3)))
        fn = [f"def {name}({args}) -> {rng.choice(_TYPES)}:"]
        fn.append(
            f'    """{rng.choice(_VERBS).capitalize()} the {rng.choice(_NOUNS)} for {mod}."""'
        )
        for _ in range(rng.randint(3, 14)):
            var, item = rng.sample(_NOUNS, 2)
            kind = rng.random()
            if kind < 0.25:
                fn.append(f"    {var} = {_ident(rng)}({item})")
            elif kind < 0.4:
                err = rng.choice(_ERRORS)
                fn += [
                    f"    if {var} is None:",
                    f'        raise {err}(f"missing {var}: {{{item}!r}}")',
                ]
            elif kind < 0.55:
                fn += [
                    f"    for {item} in {var}:",
                    f"        total += Decimal({item}.amount_cents) / 100",
                ]
            elif kind < 0.65:
                comment = rng.choice(_CJK_COMMENTS) if rng.random() < 0.3 else f"keep {var} stable"
                fn.append(f"    # {comment}")
            elif kind < 0.8:
                fn.append(f'    logger.debug("{rng.choice(_VERBS)} {var} %s", {item})')
            else:
                fn.append(
                    f"    {var}.{rng.choice(_VERBS)}({item}, strict={rng.choice(('True', 'False'))})"
                )
        fn.append(f"    return {rng.choice(_NOUNS)}")
        fn.append("")
        fn.append("")
        out += fn
        size += sum(len(x) + 1 for x in fn)
    return "\n".join(out)


def _ts_file(rng: Random, path: str, target: int) -> str:
    out = [
        'import { useEffect, useState } from "react";',
        'import { api } from "../api/client";',
        "",
    ]
    size = sum(len(x) + 1 for x in out)
    while size < target:
        name = _camel(rng)
        fn = [f"export async function {name}({rng.choice(_NOUNS)}: string): Promise<number> {{"]
        for _ in range(rng.randint(3, 10)):
            var, item = rng.sample(_NOUNS, 2)
            kind = rng.random()
            if kind < 0.35:
                fn.append(f"  const {var} = await api.{_camel(rng)}({item});")
            elif kind < 0.55:
                fn.append(f'  if (!{var}) throw new Error("{rng.choice(_VERBS)} failed: {item}");')
            elif kind < 0.75:
                fn.append(f"  // {rng.choice(_VERBS)} the {item} before rendering")
            else:
                fn.append(f"  setState((s) => ({{ ...s, {var}: {item}.length }}));")
        fn += [f"  return {rng.choice(_NOUNS)}.length;", "}", ""]
        out += fn
        size += sum(len(x) + 1 for x in fn)
    return "\n".join(out)


def _doc_file(rng: Random, path: str, target: int, sentences: list[str]) -> str:
    cjk = "架构" in path
    out = [f"# {path.rsplit('/', 1)[-1].removesuffix('.md')}", ""]
    size = 0
    while size < target:
        if cjk:
            para = "".join(rng.choice(_CJK_COMMENTS) + "。" for _ in range(rng.randint(2, 6)))
        else:
            para = " ".join(rng.choice(sentences) for _ in range(rng.randint(2, 6)))
        out += [f"## {rng.choice(_VERBS).capitalize()} {rng.choice(_NOUNS)}", "", para, ""]
        size += len(para) + 40
    return "\n".join(out)


def _csv_file(rng: Random, target: int) -> str:
    out = ["date,payee,amount,currency,memo"]
    size = 0
    while size < target:
        d = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        amt = f"{rng.choice(('-', ''))}{rng.randint(1, 99999) / 100:.2f}"
        line = f'{d},"{rng.choice(_MERCHANTS)}",{amt},{rng.choice(("EUR", "USD", "JPY", "CNY"))},'
        line += rng.choice(("", "refund", "subscription", "返金", "split 50/50"))
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)


def _tokenizer_cases(rng: Random) -> str:
    lines = [
        "# strings that must survive a round trip through the summarizer",
        "plain ascii",
        "<|endoftext|>",
        "prefix <|endoftext|> suffix",
        "<|im_start|>system<|im_end|>",
        "emoji: 🎉🚀👀 and ZWJ family 👨‍👩‍👧",
        "CJK: 中文字符、日本語のテキスト、한국어",
        "combining: é vs é",
        "right-to-left: مرحبا",
        "tab\tseparated\tvalues",
    ]
    return "\n".join(lines + [f"case {i}: {rng.choice(lines)}" for i in range(40)])


def _config_file(path: str) -> str:
    if path.endswith(".toml"):
        return (
            '[project]\nname = "ledgerline"\nversion = "0.8.2"\nrequires-python = ">=3.11"\n'
            'dependencies = ["click>=8.1", "python-dateutil>=2.9"]\n\n[tool.pytest.ini_options]\n'
            'testpaths = ["tests"]\naddopts = "-q"\n'
        )
    if path.endswith("package.json"):
        return (
            '{\n  "name": "ledgerline-web",\n  "private": true,\n  "scripts": {\n'
            '    "dev": "vite",\n    "build": "tsc && vite build",\n    "test": "vitest run"\n'
            '  },\n  "dependencies": { "react": "^18.3.1" }\n}\n'
        )
    if path.endswith("tsconfig.json"):
        return '{\n  "compilerOptions": { "strict": true, "jsx": "react-jsx", "target": "ES2022" }\n}\n'
    if path.endswith(".yml"):
        return (
            "name: ci\non: [push, pull_request]\njobs:\n  test:\n    runs-on: ubuntu-latest\n"
            "    steps:\n      - uses: actions/checkout@v4\n      - run: make test\n"
        )
    return "test:\n\tpytest -q\n\nlint:\n\truff check src tests\n"


def _png(rng: Random, width: int, height: int) -> bytes:
    """A valid PNG of noisy gradient pixels: decodable, and as incompressible as screenshots."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    rows = bytearray()
    for y in range(height):
        rows.append(0)
        for x in range(width):
            rows += bytes(((x * 7 + rng.randint(0, 60)) & 255, (y * 5) & 255, rng.randint(0, 255)))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(bytes(rows), 9))
        + chunk(b"IEND", b"")
    )


_SENTENCE_TEMPLATES = (
    "The failure comes from `{func}` in `{file}`: it assumes the {noun} is already normalized.",
    "I'll check how `{func}` handles an empty {noun} before changing anything.",
    "`{file}` calls `{func}` twice, once per {noun}, which explains the duplicated rows.",
    "Running the {test} suite again to confirm the {noun} fix.",
    "The traceback points at line {num} of `{file}`.",
    "That {noun} is parsed with the wrong delimiter when the export has a BOM.",
    "Rounding happens before the currency conversion, so {num} cents go missing.",
    "I kept the public signature of `{func}` unchanged so the CLI still works.",
    "The {test} test was flaky because it depended on the local timezone.",
    "`{func}` now raises `{err}` instead of silently returning None.",
    "Let me look at the {noun} handling in `{file}` first.",
    "The cache key ignored the {noun}, so stale balances were served.",
    "I added a regression test for the {noun} case in `{file}`.",
    "This matches what the bank's CSV spec says about the {noun} column.",
    "Both code paths now go through `{func}`, which removes the special case.",
    "The user wants the {noun} totals to match the statement exactly.",
    "Edge case: a {noun} with a negative zero amount (-0.00).",
    "I'm not sure whether `{func}` is used by the web dashboard; grep will tell.",
    "Let me avoid touching `{file}` more than needed.",
    "Performance is fine: the {noun} import of {num} rows takes under a second.",
)


def _sentences(rng: Random, count: int) -> list[str]:
    out = []
    files = PY_FILES + TS_FILES
    for _ in range(count):
        t = rng.choice(_SENTENCE_TEMPLATES)
        s = t.format(
            func=_ident(rng),
            file=rng.choice(files),
            noun=rng.choice(_NOUNS),
            test=rng.choice(PY_FILES[15:]).rsplit("/", 1)[-1],
            num=rng.randint(2, 4000),
            err=rng.choice(_ERRORS),
        )
        r = rng.random()
        if r < 0.03:
            s += " " + rng.choice(_EMOJI)
        elif r < 0.05:
            s += " (" + rng.choice(_CJK_COMMENTS) + ")"
        out.append(s)
    return out


def _log_blob(rng: Random, target: int) -> str:
    """Test runs, tracebacks, git and npm output, concatenated: the stuff bash returns."""
    parts: list[str] = []
    size = 0
    while size < target:
        kind = rng.random()
        if kind < 0.3:
            tests = rng.sample(PY_FILES[15:], rng.randint(1, 4))
            lines = [
                "============================= test session starts =============================="
            ]
            lines.append("platform linux -- Python 3.11.9, pytest-8.3.3, pluggy-1.5.0")
            lines.append(f"rootdir: {CWD}")
            lines.append(f"collected {rng.randint(20, 400)} items")
            lines.append("")
            for t in tests:
                dots = "".join(rng.choice("....F.s") for _ in range(rng.randint(10, 60)))
                lines.append(f"{t} {dots} [{rng.randint(1, 100):3d}%]")
            lines.append("")
            if rng.random() < 0.5:
                func = _ident(rng)
                lines += [
                    "=================================== FAILURES ===================================",
                    f"____________________________ test_{func} _____________________________",
                    "",
                    f"    def test_{func}():",
                    f">       assert {func}(fixture_rows) == Decimal('{rng.randint(1, 9999) / 100:.2f}')",
                    f"E       AssertionError: assert Decimal('{rng.randint(1, 9999) / 100:.2f}') == Decimal('{rng.randint(1, 9999) / 100:.2f}')",
                    "",
                    f"{rng.choice(PY_FILES[15:])}:{rng.randint(10, 400)}: AssertionError",
                    "=========================== short test summary info ============================",
                    f"FAILED {rng.choice(PY_FILES[15:])}::test_{func} - AssertionError",
                    f"========================= 1 failed, {rng.randint(20, 300)} passed in {rng.randint(1, 30)}.{rng.randint(10, 99)}s =========================",
                ]
            else:
                lines.append(
                    f"============================== {rng.randint(20, 300)} passed in {rng.randint(1, 30)}.{rng.randint(10, 99)}s =============================="
                )
        elif kind < 0.45:
            lines = ["Traceback (most recent call last):"]
            for _ in range(rng.randint(2, 7)):
                lines.append(
                    f'  File "{CWD}/{rng.choice(PY_FILES)}", line {rng.randint(5, 600)}, in {_ident(rng)}'
                )
                lines.append(f"    {_ident(rng)}({rng.choice(_NOUNS)})")
            lines.append(
                f"{rng.choice(_ERRORS)}: could not {rng.choice(_VERBS)} {rng.choice(_NOUNS)} '{rng.choice(_MERCHANTS)}'"
            )
        elif kind < 0.6:
            lines = []
            for _ in range(rng.randint(3, 12)):
                h = f"{rng.getrandbits(28):07x}"
                lines.append(
                    f"{h} {rng.choice(_VERBS).capitalize()} {rng.choice(_NOUNS)} handling in {rng.choice(PY_FILES)}"
                )
        elif kind < 0.75:
            f = rng.choice(PY_FILES)
            lines = [
                f"diff --git a/{f} b/{f}",
                f"index {rng.getrandbits(28):07x}..{rng.getrandbits(28):07x} 100644",
            ]
            lines += [
                f"--- a/{f}",
                f"+++ b/{f}",
                f"@@ -{rng.randint(1, 300)},7 +{rng.randint(1, 300)},9 @@",
            ]
            for _ in range(rng.randint(4, 20)):
                var, item = rng.sample(_NOUNS, 2)
                lines.append(
                    rng.choice((" ", " ", "-", "+")) + f"    {var} = {_ident(rng)}({item})"
                )
        elif kind < 0.85:
            lines = [f"> ledgerline-web@0.8.2 {rng.choice(('test', 'build'))}", "> vitest run", ""]
            for _ in range(rng.randint(2, 8)):
                lines.append(
                    f" ✓ src/{rng.choice(('hooks', 'components', 'api'))}/{_camel(rng)}.test.ts ({rng.randint(1, 40)} tests) {rng.randint(3, 900)}ms"
                )
            lines.append(f" Test Files  {rng.randint(2, 9)} passed")
        else:
            lines = [f"total {rng.randint(20, 400)}"]
            for _ in range(rng.randint(4, 15)):
                name = rng.choice(ALL_TEXT_FILES).rsplit("/", 1)[-1]
                lines.append(
                    f"-rw-r--r--  1 dev dev {rng.randint(80, 90000):6d} Mar {rng.randint(1, 28):2d} 10:{rng.randint(0, 59):02d} {name}"
                )
        text = "\n".join(lines) + "\n"
        parts.append(text)
        size += len(text)
    return "".join(parts)


class Corpus:
    """Everything the generator samples from; built once per seed."""

    def __init__(self, seed: int) -> None:
        rng = Random(f"corpus-{seed}")
        self.sentences = _sentences(rng, 3000)
        self.files: dict[str, str] = {}
        for p in PY_FILES:
            self.files[p] = _py_file(rng, p, rng.choice((3_000, 8_000, 15_000, 40_000)))
        for p in TS_FILES:
            self.files[p] = _ts_file(rng, p, rng.choice((2_000, 6_000, 12_000)))
        for p in DOC_FILES:
            self.files[p] = _doc_file(rng, p, rng.choice((2_000, 9_000)), self.sentences)
        self.files["tests/fixtures/bank_export.csv"] = _csv_file(rng, 30_000)
        self.files["tests/fixtures/tokenizer_cases.txt"] = _tokenizer_cases(rng)
        for p in CONFIG_FILES:
            self.files[p] = _config_file(p)
        self.code = "\n".join(self.files[p] for p in PY_FILES + TS_FILES)
        self.logs = _log_blob(rng, 400_000)
        self.images = {
            p: base64.b64encode(_png(rng, w, h)).decode()
            for p, (w, h) in zip(IMAGE_FILES, ((40, 30), (24, 24), (12, 12)), strict=True)
        }
        self.b64 = base64.b64encode(rng.randbytes(48_000)).decode()
        self.skill_docs = {
            s: f"---\nname: {s}\ndescription: How this team does {s.replace('-', ' ')}.\n---\n\n"
            + "\n".join(f"- {x}" for x in rng.sample(self.sentences, 12))
            for s in SKILLS
        }

    def slice(self, blob: str, rng: Random, size: int) -> str:
        """About ``size`` characters of ``blob``, starting and ending on line boundaries."""
        if size >= len(blob):
            return blob
        start = rng.randrange(0, len(blob) - size)
        nl = blob.find("\n", start)
        start = nl + 1 if 0 <= nl < start + 200 else start
        end = blob.rfind("\n", start, start + size)
        return blob[start : end if end > start else start + size]

    def prose(self, rng: Random, size: int) -> str:
        out: list[str] = []
        n = 0
        while n < size:
            s = rng.choice(self.sentences)
            out.append(s)
            n += len(s) + 1
        return " ".join(out)
