"""Config schema, YAML groups and error messages."""

from pathlib import Path

import pytest

from ucse.config import (
    CONFIG_DIR,
    GROUPS,
    ConfigError,
    HeadType,
    Pooling,
    Recipe,
    build_config,
    from_yaml,
    group_choices,
    to_yaml,
)
from ucse.config.build import parse_flat_config


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
    assert (cfg.task.name, cfg.backbone.name, cfg.head.type, cfg.recipe) == (
        "Banking77Classification",
        "minilm-l6",
        HeadType.auto,
        Recipe.auto,
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
        (["loss.lcl_weigth=1"], "Did you mean 'loss.lcl_weight'"),  # the whole key: pasted back as it is
        (["head=textcnm"], "Did you mean 'textcnn'"),
        (["head=logistic"], "Did you mean 'logreg'"),  # a trial's guess at the probe's name
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


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("optim.epochs=0", "optim.epochs=0: allowed an integer >= 1"),
        ("optim.epochs=-1", "optim.epochs=-1: allowed an integer >= 1"),
        ("optim.lr=-0.001", "optim.lr=-0.001: allowed a finite number > 0"),
        ("optim.lr=0", "optim.lr=0.0: allowed"),
        ("optim.warmup_ratio=5", "optim.warmup_ratio=5.0: allowed 0 <= warmup_ratio <= 1"),
        ("optim.warmup_ratio=-0.1", "optim.warmup_ratio=-0.1"),
        ("optim.batch_size=0", "optim.batch_size=0: allowed an integer >= 1"),
        ("backbone.max_length=0", "backbone.max_length=0: allowed an integer >= 1"),
        ("backbone.batch_size=0", "backbone.batch_size=0"),
        ("loss.temperature=0", "loss.temperature=0.0: allowed > 0"),
        ("loss.lcl_weight=1.5", "loss.lcl_weight=1.5: allowed 0 <= lcl_weight <= 1"),
        ("loss.lcl_weight=-0.1", "loss.lcl_weight=-0.1"),
        ("head.dropout=1", "head.dropout=1.0: allowed 0 <= dropout < 1"),
        ("head.kernel_sizes=[]", "head.kernel_sizes=[]"),
        ("seed=-3", "seed=-3: allowed an integer in [0, 2^32 - 1]"),
        ("seed=4294967296", "seed=4294967296: allowed an integer in [0, 2^32 - 1]"),  # NumPy failed on it
        ("seed=???", "'seed=???' leaves 'seed' unset"),
        ("seed=1.5", "could not be converted to Integer; seed takes int ("),
        (
            "backbone.layer=mid",
            "could not be converted to Integer; backbone.layer takes int | null (`ucse train",
        ),
        ("optim.lr=abc", "optim.lr takes float ("),
        ("backbone.prompt=no placeholder", "a template containing {text}"),
    ],
)
def test_out_of_range_values_are_refused_at_build_time(override, needle):
    with pytest.raises(ConfigError) as err:
        build_config([override])
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_cuda_without_a_gpu_is_refused_at_build_time(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="accelerator='cuda': no CUDA GPU is visible; use accelerator=auto"):
        build_config(["accelerator=cuda"])


def test_old_spellings_still_work_with_a_warning(tmp_path: Path, caplog):
    from ucse.evaluation.config import EvalConfig
    from ucse.inference.config import PredictConfig

    with caplog.at_level("WARNING", logger="ucse.config.build"):
        cfg = build_config(["device=cpu"])
    assert cfg.accelerator.value == "cpu"
    assert "'device=' is now 'accelerator='" in caplog.text
    assert parse_flat_config(EvalConfig, ["device=cpu"], "eval.py").accelerator.value == "cpu"
    assert parse_flat_config(PredictConfig, ["device=cpu", "run=r"], "predict").accelerator.value == "cpu"
    # A run folder written before the rename reads back silently (the user did not type it).
    old = to_yaml(build_config(["accelerator=cpu"])).replace("accelerator: cpu", "device: cpu")
    old = old.replace("  gaussian: true", "  uncertainty: true")
    # before one name per concept, a run saved both a task's column and a data override (null when unset)
    old = old.replace("  text_column: text\n", "  text_column: null\n").replace(
        "task:\n", "task:\n  text_column: body\n"
    )
    assert "device: cpu" in old and "  uncertainty: true" in old and "  text_column: body" in old
    (tmp_path / "config.yaml").write_text(old)
    caplog.clear()
    with caplog.at_level("WARNING", logger="ucse.config.build"):
        back = from_yaml(tmp_path / "config.yaml")
    assert back.accelerator.value == "cpu" and back.head.gaussian is True and back.data.text_column == "body"
    assert caplog.text == ""
    with caplog.at_level("WARNING", logger="ucse.config.build"):
        assert build_config(["head.uncertainty=false"]).head.gaussian is False
        assert build_config(["task.label_column=intent"]).data.label_column == "intent"
        assert build_config(["task.test_fraction=0.3"]).task.carved_test_fraction == 0.3
    assert "'head.uncertainty=' is now 'head.gaussian='" in caplog.text
    assert "'task.label_column=' is now 'data.label_column='" in caplog.text


def test_a_prompt_with_colons_is_taken_verbatim():
    # OmegaConf would read `query: {text}` as a YAML mapping; a string field keeps the text as typed.
    cfg = build_config(["backbone.prompt=task: classification | query: {text}"])
    assert cfg.backbone.prompt == "task: classification | query: {text}"
    assert build_config(["backbone.revision=null"]).backbone.revision is None


@pytest.mark.parametrize(
    ("override", "key", "text"),
    [
        # YAML made these numbers or booleans: 0123 -> 83 (octal), 12e4567 -> inf, 2024_01 -> 202401
        ("backbone.revision=0123", ("backbone", "revision"), "0123"),
        ("backbone.revision=12e4567", ("backbone", "revision"), "12e4567"),
        ("output_dir=2024_01", ("output_dir",), "2024_01"),
        ("name=2024_01_15", ("name",), "2024_01_15"),
        ("task.instruction=on", ("task", "instruction"), "on"),
        ("backbone.revision='v1.0'", ("backbone", "revision"), "v1.0"),  # quotes are YAML's and go
    ],
)
def test_a_text_field_keeps_the_text_as_typed(override, key, text):
    node = build_config([override])
    for part in key:
        node = getattr(node, part)
    assert node == text


def test_resuming_a_head_fitted_in_memory_is_refused():
    with pytest.raises(ConfigError, match="head.type=logreg is fitted in memory"):  # refitted in place before
        build_config(["head=logreg", "ckpt_path=last"])


def test_a_group_file_that_is_not_a_mapping_is_one_error(tmp_path):
    (tmp_path / "list.yaml").write_text("- a\n- b\n")  # a raw TypeError from the merge before
    with pytest.raises(ConfigError, match=r"head=.*list.yaml: .*list.yaml holds a ListConfig, not a mapping"):
        build_config([f"head={tmp_path / 'list.yaml'}"])


def test_overwrite_and_resume_together_are_refused():
    with pytest.raises(ConfigError, match="overwrite=true and ckpt_path='last' contradict"):
        build_config(["overwrite=true", "ckpt_path=last"])


def test_validation_runs_before_any_data_is_read(tmp_path):
    # The data path does not exist: the range error must come first (nothing loaded, nothing written).
    with pytest.raises(ConfigError, match="optim.epochs=0"):
        build_config(
            [f"data.path={tmp_path / 'missing.csv'}", "optim.epochs=0", f"output_dir={tmp_path / 'r'}"]
        )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("value", "on"),
    [
        (None, False),
        ("", False),
        ("0", False),
        ("false", False),
        (" OFF ", False),
        ("1", True),
        ("yes", True),
    ],
)
def test_ucse_debug_reads_zero_as_off(monkeypatch, value, on):
    from ucse.config import DEBUG_ENV, debug_mode

    if value is None:
        monkeypatch.delenv(DEBUG_ENV, raising=False)
    else:
        monkeypatch.setenv(DEBUG_ENV, value)
    assert debug_mode() is on


def test_a_training_setting_given_to_predict_says_the_run_fixed_it():
    # a decoder trial: `ucse predict ... backbone=minilm-l6` only said the key was unknown
    from ucse.inference.config import PredictConfig

    for token in ("backbone=minilm-l6", "backbone.layer=3", "head.dropout=0.1"):
        with pytest.raises(ConfigError) as err:
            parse_flat_config(PredictConfig, ["run=r", "input=x", token], "predict")
        top = token.split(".")[0].split("=")[0]
        assert f"{top} is the run's own, fixed when it was trained. Valid keys: run, input" in str(err.value)
    with pytest.raises(ConfigError) as err:  # a profile setting: ucse calibrate changes it, no retraining
        parse_flat_config(PredictConfig, ["run=r", "uncertainty.abstain.coverage=0.9"], "predict")
    assert "ucse calibrate run=<run> uncertainty.<setting>=... changes them" in str(err.value)
    assert "fixed when it was trained" not in str(err.value)
    with pytest.raises(ConfigError) as err:  # a mistyped key of predict's own: no such note
        parse_flat_config(PredictConfig, ["run=r", "imput=x"], "predict")
    assert "fixed when it was trained" not in str(err.value) and "Did you mean 'input'?" in str(err.value)
