"""Subcommands of ``aryl-gym`` (one module each; see :mod:`aryl_gym.cli`)."""
