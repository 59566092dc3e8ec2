"""Workloads: the seeded synthetic generator and (validated) trace loaders."""

from aryl_gym.workload.generator import generate_jobs, workload_summary

__all__ = ["generate_jobs", "workload_summary"]
