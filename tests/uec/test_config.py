"""Ensemble configs: bundled ones load, bad files and keys fail naming the file, line or key."""

from __future__ import annotations

from pathlib import Path

import pytest

from ucse.config import ConfigError
from ucse.uec.config import ENSEMBLE_DIR, load_ensemble_config


def test_an_ensemble_file_that_is_not_yaml_fails_naming_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmembers:\n  - {id: a, kind: head, head_dir: runs/{task}/head}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml is not valid YAML: .*line 3"):
        load_ensemble_config(str(bad))


def test_config_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match="Unknown ensemble 'nope'. Valid choices: .*minilm-pair"):
        load_ensemble_config("nope")
    (tmp_path / "bad.yaml").write_text("name: x\nmembers:\n  - {id: a, backbone: minilm-l6, fitt: {}}\n")
    with pytest.raises(ConfigError, match=r"Unknown key 'fitt' in a members\[\] entry .*Did you mean 'fit'"):
        load_ensemble_config(str(tmp_path / "bad.yaml"))
    (tmp_path / "bad2.yaml").write_text(
        "name: x\nmembers:\n  - {id: a, backbone: minilm-l6}\nvariants: [uec, best]\n"
    )
    with pytest.raises(ConfigError, match=r"variants\[\]='best'; choose one of \['uec'"):
        load_ensemble_config(str(tmp_path / "bad2.yaml"))
    (tmp_path / "bad3.yaml").write_text("name: x\nmembers:\n  - {id: a, backbone: minilm-l6}\nrule: trace\n")
    with pytest.raises(ConfigError, match="rule='trace'; choose one of .*Did you mean 'softmax_trace'"):
        load_ensemble_config(str(tmp_path / "bad3.yaml"))
    # accepted before, then failed after every member was built (T = 0 is refused in divide mode)
    (tmp_path / "bad4.yaml").write_text(
        "name: x\nmembers:\n  - {id: a, backbone: minilm-l6}\n  - {id: b, backbone: minilm-l6}\n"
        "temperature_mode: divide\nequal_weights_fallback: true\n"
    )
    with pytest.raises(ConfigError, match="equal_weights_fallback=true needs temperature_mode=sharpen"):
        load_ensemble_config(str(tmp_path / "bad4.yaml"))


def test_every_bundled_ensemble_config_loads():
    paths = sorted(ENSEMBLE_DIR.glob("*.yaml"))
    assert paths
    for path in paths:
        cfg = load_ensemble_config(path.stem)
        for m in cfg.members:  # relative head folders resolve against the config file, not the cwd
            assert m.head_dir is None or Path(m.head_dir).is_absolute()
