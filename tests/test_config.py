import subprocess
import sys
from pathlib import Path

import pytest
from process_support import PATIENCE

from fedpriv.errors import InputError
from fedpriv.schema import parse_override
from workflows.config import Config, load_config

CONFIGS = sorted((Path(__file__).parents[1] / "configs").glob("*.toml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_shipped_preset_validates(path):
    cfg = load_config(path)
    assert Config.from_json(cfg.to_json()) == cfg


def test_set_overrides_any_key_with_toml_typed_values():
    cfg = load_config(
        CONFIGS[0],
        ["rounds=3", "train.lr=0.25", "data.name=mnist", "mechanism.clip_per_layer=[1, 2, 0.5]"],
    )
    assert (cfg.rounds, cfg.train.lr, cfg.data.name) == (3, 0.25, "mnist")
    assert cfg.mechanism.value("clip_per_layer") == [1, 2, 0.5]


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("rounds=0", "rounds"),
        ("rounds=2.5", "rounds"),
        ("train.lr=-1", "train.lr"),
        ("train.colour=1", "train.colour"),
        ("mechanism.name=fancy", "mechanism.name"),
        ("mechanism.noise_multiplier=-0.1", "mechanism.noise_multiplier"),
        ("mechanism.kappa=0", "mechanism.kappa"),
        ("mechanism.clip=0", "mechanism.clip"),
        ("audit.delta=1", "audit.delta"),
        ("audit.attacks=['']", "audit.attacks"),
        ("audit.tune_scope=epoch", "audit.tune_scope"),
        ("audit.early_stop=0.9", "audit.early_stop"),
        ("audit.early_stop=-0.01", "audit.early_stop"),
        ("strategy.name=fedsgd", "strategy.name"),
        ("strategy.eta=0.1", "strategy.eta"),
        ("data.partition=zipf", "data.partition"),
        ("data=3", "data"),
        ("train.batch_size=true", "train.batch_size"),
    ],
)
def test_bad_values_name_the_key_value_and_what_is_allowed(override, key):
    with pytest.raises(InputError) as err:
        load_config(CONFIGS[0], [override])
    assert err.value.key == key
    assert key in str(err.value) and "expected" in str(err.value)


def test_overrides_give_each_client_its_own_mechanism():
    cfg = load_config(None)
    raw = cfg.to_dict()
    raw["mechanism"]["overrides"] = [{"clients": [0, 1], "name": "vmf", "kappa": 50.0}]
    from workflows.config import config_from_dict

    cfg = config_from_dict(raw)
    assert cfg.mechanism.for_client(0) == ("vmf", {**cfg.mechanism.params, "kappa": 50.0})
    assert cfg.mechanism.for_client(2)[0] == cfg.mechanism.name
    raw["mechanism"]["overrides"] = [{"clients": [99], "name": "vmf"}]
    with pytest.raises(InputError, match=r"mechanism.overrides\[0\].clients"):
        config_from_dict(raw)


def test_malformed_override_and_missing_file_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="--set"):
        parse_override("no-equals-sign")
    with pytest.raises(InputError, match="CONFIG"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("rounds = = 3")
    with pytest.raises(InputError, match="valid TOML"):
        load_config(bad)


def test_cli_exits_2_with_one_line_naming_the_key_and_writes_nothing(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "fedpriv", "simulate", str(CONFIGS[0]), "--set",
         "mechanism.noise_multiplier=-1", "--out", str(out)],
        capture_output=True, text=True, timeout=PATIENCE,
    )
    assert proc.returncode == 2
    assert "mechanism.noise_multiplier" in proc.stderr and "-1" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()


def test_library_alone_knows_only_its_own_sections_and_carries_what_it_is_told():
    """The library imports no application section: a process that registers none refuses
    ``[strategy]`` as an unknown key, carries it raw when told to, and a client keeps the
    sections the server validated; the library's config imports no torch."""
    code = (
        "import sys, fedpriv.config as c\n"
        "from fedpriv.errors import InputError\n"
        "try:\n"
        "    c.config_from_dict({'strategy': {'name': 'krum'}})\n"
        "except InputError as e:\n"
        "    print(e.key)\n"
        "cfg = c.config_from_dict({'strategy': {'name': 'krum'}}, carried=['strategy'])\n"
        "print(cfg.strategy, c.Config.from_json(cfg.to_json()).strategy, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split("\n")[:2] == [
        "strategy", "{'name': 'krum'} {'name': 'krum'} False"]


def test_a_section_is_registered_once_and_never_over_a_library_key():
    from fedpriv.config import register_section
    from strategies.config import StrategyConfig

    with pytest.raises(ValueError, match="library"):
        register_section("train", StrategyConfig)
    with pytest.raises(ValueError, match="already registered"):
        register_section("strategy", dict)


def test_server_app_checks_its_own_sections_and_carries_the_rest_to_the_clients():
    """Under ``flwr run`` the ServerApp registers ``[strategy]`` alone: every shipped preset
    loads (``[[adversary]]``, ``[sweep]`` and ``[simulation]`` carried unread), and a
    misspelt section or a bad strategy key is still refused by name."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from strategies.run_config import resolve_run_config\n"
        "from fedpriv.errors import InputError\n"
        "for p in sorted(Path('configs').glob('*.toml')):\n"
        "    resolve_run_config({'config': str(p.resolve()), 'out': '/tmp/x'})\n"
        "for bad in ('strategi.name=krum', 'strategy.eta=0.1'):\n"
        "    try:\n"
        "        resolve_run_config({'set': bad, 'out': '/tmp/x'})\n"
        "    except InputError as e:\n"
        "        print(e.key)\n"
        "print(sorted(m for m in ('clients', 'workflows') if m in sys.modules))\n"
    )
    root = Path(__file__).parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=root)
    assert out.stdout.split() == ["strategi", "strategy.eta", "[]"]


def test_a_section_registered_while_a_config_is_built_is_not_checked_by_that_build(monkeypatch):
    """Flower's simulation loads the ClientApp (which registers ``[[adversary]]``) in a thread
    beside the ServerApp: a section registered mid-build must not run its check on a config
    that never built it (it did, and ``flwr run`` failed with AttributeError)."""
    import dataclasses

    import fedpriv.config as config

    monkeypatch.setattr(config, "_SECTIONS", dict(config._SECTIONS))

    @dataclasses.dataclass(frozen=True)
    class Late:
        size: int = 1

    def read_late(cfg):
        return cfg.late

    def register_late(cfg):
        config.register_section("late", Late, check=read_late)

    config.register_section("early", Late, check=register_late)
    cfg = config.config_from_dict({})
    assert "late" not in cfg.sections and "late" in config.section_names()
    assert config.config_from_dict({}).late == Late()
