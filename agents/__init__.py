"""Reference policies (installed as ``aryl_gym.agents``).

``make_policy(name)`` builds one by name; ``policy_names()`` lists them.
"""

from aryl_gym.agents.base import BasePolicy, make_policy, policy_names, register

__all__ = ["BasePolicy", "make_policy", "policy_names", "register"]
