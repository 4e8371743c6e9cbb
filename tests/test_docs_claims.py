"""What the README and docs claim that can be checked mechanically (issue 41, item 8): the
README's documentation table links every page of docs/ exactly once; every config key the docs
quote is one the schema takes; no command's --help shows a doubled percent sign; the example
app's README claims the label its test checks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import workflows.config  # noqa: F401 - registers the application's sections
from fedpriv.config import config_entries
from workflows.cli.main import build_parser

ROOT = Path(__file__).parents[1]
PAGES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))
DOCS = ["README.md", *PAGES, "examples/audited-app/README.md", "DEVELOPERS.md"]
#: Not config keys, though they read like one: files, and the store's tables' columns.
_NOT_KEYS = re.compile(r"\.(sqlite|json|csv|html|md|toml|png|svg)$")


def _documentation_table() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Documentation", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| \[[^\]]*\]\((docs/[^)]+\.md)\)", table, flags=re.M)


def test_the_readme_links_every_doc_page_exactly_once():
    linked = _documentation_table()
    assert sorted(linked) == PAGES, (sorted(linked), PAGES)  # none missing, none twice


def _config_keys() -> tuple[set[str], set[str]]:
    keys = {e.key for e in config_entries()}
    tables = {k.split(".")[0].split("[")[0] for k in keys if "." in k}
    return keys, tables


def _quoted_keys(text: str, tables: set[str]) -> list[str]:
    tables_alt = "|".join(sorted(tables))
    pattern = re.compile(rf"`(?:--set )?((?:{tables_alt})(?:\.[a-z_]+(?:\[\d*\])?)+)"
                         r"(?:\s*=[^`]*)?`")
    return [m.group(1) for m in pattern.finditer(text) if not _NOT_KEYS.search(m.group(1))]


@pytest.mark.parametrize("page", DOCS)
def test_every_config_key_the_docs_quote_exists(page):
    keys, tables = _config_keys()
    unknown = []
    for quoted in _quoted_keys((ROOT / page).read_text(encoding="utf-8"), tables):
        key = re.sub(r"\[\d*\]", "[i]", quoted)
        if key not in keys and not any(k.startswith((key + ".", key + "[")) for k in keys):
            unknown.append(quoted)
    assert not unknown, f"{page} quotes keys the schema does not take: {unknown}"


def test_the_key_check_catches_a_wrong_key():
    keys, tables = _config_keys()
    assert _quoted_keys("set `train.learning_rate = 1` or `audit.sqlite`", tables) == [
        "train.learning_rate"]
    assert "train.learning_rate" not in keys


def test_no_help_text_shows_a_doubled_percent_sign():
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    for name, command in sub.choices.items():
        assert "%%" not in command.format_help(), name
    assert "%%" not in parser.format_help()


def test_the_example_apps_readme_claims_what_its_test_checks():
    readme = (ROOT / "examples" / "audited-app" / "README.md").read_text(encoding="utf-8")
    test = (ROOT / "tests" / "test_example_app.py").read_text(encoding="utf-8")
    assert "assert_labelled_by_tests" in test  # declared or verified, as the properties say
    assert "are `verified`" not in readme and "`declared`" in readme


def _quoted_commands() -> list[tuple[str, list[str]]]:
    """Every concrete ``fedpriv ...`` command the docs quote in a code block (placeholders such
    as ``RUN_DIR`` or ``[--set ...]`` left out; code spans in prose name flags rather than
    quote invocations): page and argv."""
    import shlex

    found = []
    for page in DOCS:
        text = (ROOT / page).read_text(encoding="utf-8")
        fenced = re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)
        blocks = [body for lang, body in fenced if lang in ("", "bash", "sh", "console")]
        for line in "\n".join(blocks).replace("\\\n", " ").splitlines():
            m = re.search(r"(?:^|&& |; |\$ )((?:python -m )?fedpriv [^#;&|]*)", line.strip())
            if not m or any(s in m.group(1) for s in ("[", "...", "…", "<", "|")):
                continue
            try:
                argv = shlex.split(m.group(1))
            except ValueError:
                continue
            argv = argv[3:] if argv[:3] == ["python", "-m", "fedpriv"] else argv[1:]
            if len(argv) > 1 and not any(re.fullmatch(r"[A-Z][A-Z_]*(=[A-Z_]+)?", a) for a in argv):
                found.append((page, argv))
    return found


def test_every_command_the_docs_quote_parses():
    """The quoted commands' flags and values are the command line's (argparse's checks: a
    renamed flag, a dropped choice); what they compute is the docs tests' and the page's."""
    import contextlib
    import io

    parser = build_parser()
    commands = _quoted_commands()
    assert len(commands) >= 15, commands
    for page, argv in commands:
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                parser.parse_args(argv)
            except SystemExit as exc:
                assert not exc.code, f"{page}: fedpriv {' '.join(argv)}: {err.getvalue()}"


def test_the_quickstart_epsilons_the_readme_quotes():
    """The README's quickstart output (ε per client, at 3 significant figures) and the RDP ε it
    compares with, recomputed from the preset: each client's size, 32/n, 10 × 20 releases."""
    from fedpriv.commands.account import account
    from fedpriv.data import client_sizes, load_dataset
    from workflows.config import load_config

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quoted = re.findall(r"^ +(\d+) +gaussian +10 +([\d.]+) ", readme, flags=re.M)
    rdp = float(re.search(r"RDP gives ([\d.]+)", readme).group(1))
    cfg = load_config(ROOT / "configs" / "quickstart.toml")
    d = cfg.data
    labels = load_dataset(d.name, d.root, d.download, cfg.seed, d.test_fraction).train_y.numpy()
    sizes = client_sizes(d, labels, cfg.seed)
    steps = cfg.rounds * cfg.train.local_steps
    sigma = cfg.mechanism.for_client(0)[1]["noise_multiplier"]

    def eps(client: int, accountant: str) -> float:
        rate = cfg.train.batch_size / sizes[client]
        return account("gaussian", noise_multiplier=sigma, sample_rate=rate, steps=steps,
                       delta=cfg.audit.delta, accountant=accountant)["epsilon"]

    assert len(quoted) >= 2
    for client, value in quoted:
        assert f"{eps(int(client), 'tightest'):.3g}" == value, (client, value)
    assert f"{eps(0, 'rdp'):.3g}" == f"{rdp:.3g}"
