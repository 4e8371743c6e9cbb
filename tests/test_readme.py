"""The README's examples work: its light commands run as shown, and every preset it names exists."""

import json
import re
import shlex
from pathlib import Path

import pytest

from workflows.cli.main import main

README = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
LIGHT = ("account", "capacity", "compare", "config")


def _commands() -> list[list[str]]:
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", README, flags=re.S):
        for line in block.splitlines():
            line = re.sub(r"\[[^\]]*\]", "", line.split("#")[0]).strip()  # drop [optional]
            if line.startswith("fedpriv ") and line.split()[1] in LIGHT:
                lines.append(shlex.split(line)[1:])
    return lines


def test_readme_shows_every_light_command():
    assert {c[0] for c in _commands()} == set(LIGHT)


@pytest.mark.parametrize("argv", _commands(), ids=lambda a: a[0])
def test_readme_light_commands_run(argv, capsys):
    assert main([*argv, "--json"]) == 0
    assert isinstance(json.loads(capsys.readouterr().out), dict)


def test_every_preset_the_readme_names_exists():
    root = Path(__file__).parents[1]
    names = set(re.findall(r"configs/[\w.-]+\.toml", README))
    names |= {f"configs/{n}" for n in re.findall(r"`([\w-]+\.toml)`", README)}
    assert names and all((root / n).is_file() for n in names), names


def test_every_toml_example_is_a_valid_config():
    import tomllib

    from workflows.config import config_from_dict

    blocks = re.findall(r"```toml\n(.*?)```", README, flags=re.S)
    assert blocks
    for block in blocks:
        config_from_dict(tomllib.loads(block))
