"""The job families the synthetic workload draws (a leaf module: the configuration checks keys
against them, the job model and the generator use them)."""

from __future__ import annotations

#: Model families the paper names as elastic (Figure 3): they scale well without changing the
#: local batch size. Other families are inelastic.
ELASTIC_FAMILIES: tuple[str, ...] = ("resnet50", "vgg16", "bert", "gnmt16")

#: The generator's inelastic families (a trace's jobs take their model names instead).
INELASTIC_FAMILIES: tuple[str, ...] = ("cnn", "lstm", "transformer", "rl", "gan")
