import pytest

from ucse.config import ConfigError, build_config
from ucse.config.uncertainty import ScoreName, check_uncertainty_config


def test_uncertainty_keys_parse_and_bad_values_name_the_key():
    cfg = build_config(
        ["uncertainty.abstain.coverage=0.9", "uncertainty.score=entropy", "uncertainty.samples=0"]
    )
    assert cfg.uncertainty.abstain.coverage == 0.9 and cfg.uncertainty.score == ScoreName.entropy
    check_uncertainty_config(cfg.uncertainty)
    with pytest.raises(ConfigError, match="did you mean|Did you mean"):
        build_config(["uncertainty.score=msq"])
    for bad, key in [
        ("uncertainty.conformal.alpha=0", "conformal.alpha"),
        ("uncertainty.abstain.target_error=1.5", "abstain.target_error"),
        ("uncertainty.abstain.delta=1", "abstain.delta"),
        ("uncertainty.samples=-1", "samples"),
    ]:
        with pytest.raises(ValueError, match=key):
            check_uncertainty_config(build_config([bad]).uncertainty)
    with pytest.raises(ValueError, match="samples >= 1"):
        check_uncertainty_config(
            build_config(["uncertainty.samples=0", "uncertainty.score=mutual_information"]).uncertainty
        )
