import math

import torch

from ucse.heads import LOG_VAR_MAX, LOG_VAR_MIN, GaussianBottleneck


def test_reparameterisation_uses_mu_plus_eps_sigma():
    torch.manual_seed(0)
    b = GaussianBottleneck(5, 3, 2, uncertainty=True, dropout=0.0).train()
    x = torch.randn(4, 5)
    torch.manual_seed(123)
    out = b(x)
    torch.manual_seed(123)
    eps = torch.randn(4, 3)
    log_var = b.log_var(x).clamp(LOG_VAR_MIN, LOG_VAR_MAX)
    torch.testing.assert_close(out.mean, b.mu(x))
    torch.testing.assert_close(out.var, log_var.exp())
    torch.testing.assert_close(out.z, b.mu(x) + eps * (0.5 * log_var).exp())
    torch.testing.assert_close(out.logits, b.classifier(out.z))


def test_log_var_is_clamped():
    b = GaussianBottleneck(2, 2, 2, uncertainty=True, dropout=0.0).eval()
    with torch.no_grad():
        b.log_var.weight.zero_()
        b.log_var.bias.copy_(torch.tensor([100.0, -100.0]))
    out = b(torch.randn(3, 2))
    torch.testing.assert_close(out.var[0], torch.tensor([math.exp(LOG_VAR_MAX), math.exp(LOG_VAR_MIN)]))
    assert torch.isfinite(out.log_var).all()


def test_dropout_acts_on_features_in_training_only():
    torch.manual_seed(0)
    b = GaussianBottleneck(64, 4, 2, uncertainty=False, dropout=0.5)
    x = torch.randn(8, 64)
    assert not torch.allclose(b.train()(x).mean, b.mu(x))
    torch.testing.assert_close(b.eval()(x).mean, b.mu(x))
