"""Config schema, YAML groups and error messages."""

from pathlib import Path

import pytest

from ucse.config import (
    CONFIG_DIR,
    GROUPS,
    ConfigError,
    HeadType,
    Pooling,
    build_config,
    from_yaml,
    group_choices,
    to_yaml,
)


@pytest.mark.parametrize("group", GROUPS)
def test_every_group_yaml_loads(group):
    names = group_choices(group)
    assert names, f"no YAML under configs/{group}"
    for name in names:
        cfg = build_config([f"{group}={name}"])
        if group == "task":
            # TaskConfig names no hub copy by default: each task YAML must name its own.
            assert cfg.task.name == name and cfg.task.hf_path, name
        if group == "backbone":
            assert cfg.backbone.name == name


def test_root_yaml_defaults():
    cfg = build_config([])
    assert (cfg.task.name, cfg.backbone.name, cfg.head.type) == (
        "Banking77Classification",
        "minilm-l6",
        HeadType.textcnn,
    )
    assert cfg.optim.epochs == 3 and cfg.optim.batch_size == 64
    assert cfg.loss.kl_weight == pytest.approx(1e-3) and cfg.loss.temperature == 2.0


@pytest.mark.parametrize(
    ("backbone", "lr", "lcl", "pooling"),
    [
        ("qwen3-embedding-0.6b", 1e-4, 0.6, Pooling.last),
        ("f2llm-0.6b", 8e-4, 0.7, Pooling.last),
        ("embeddinggemma-300m", 8e-4, 0.9, Pooling.cls),
    ],
)
def test_paper_backbones_carry_their_hyperparameters(backbone, lr, lcl, pooling):
    cfg = build_config([f"backbone={backbone}"])
    assert cfg.optim.lr == pytest.approx(lr)
    assert cfg.loss.lcl_weight == pytest.approx(lcl)
    assert cfg.backbone.pooling == pooling


def test_qwen3_prompt_format():
    cfg = build_config(["backbone=qwen3-embedding-0.6b"])
    assert cfg.backbone.prompt.format(instruction="X", text="y") == "Instruct: X\nQuery:y"


def test_paper_tasks_present():
    tasks = set(group_choices("task"))
    paper = {
        "AmazonCounterfactualClassification",
        "Banking77Classification",
        "ImdbClassification",
        "MTOPDomainClassification",
        "MassiveIntentClassification",
        "MassiveScenarioClassification",
        "ToxicConversationsClassification",
        "TweetSentimentExtractionClassification",
        "FinancialPhrasebankClassification",
        "PoemSentimentClassification",
    }
    assert paper <= tasks


def test_command_line_overrides_win():
    cfg = build_config(["backbone=qwen3-embedding-0.6b", "loss.lcl_weight=0.3", "seed=7", "head=linear"])
    assert cfg.loss.lcl_weight == pytest.approx(0.3) and cfg.seed == 7 and cfg.head.type == HeadType.linear


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        (["loss.lcl_weigth=1"], "Did you mean 'lcl_weight'"),
        (["head=textcnm"], "Did you mean 'textcnn'"),
        (["task=Banking77"], "Did you mean 'Banking77Classification'"),
        (["head.type=textcn"], "expected one of"),
        (["optim.lr=abc"], "optim.lr"),
        (["bogus"], "key=value"),
    ],
)
def test_bad_config_names_the_problem(override, needle):
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
        build_config(override)


def test_yaml_roundtrip(tmp_path: Path):
    cfg = build_config(["backbone=smollm2-135m", "loss.lcl_weight=0.55"])
    path = tmp_path / "config.yaml"
    path.write_text(to_yaml(cfg))
    back = from_yaml(path)
    assert back == cfg


def test_config_dir_exists():
    assert (CONFIG_DIR / "train.yaml").is_file()
