"""Fabret et al. (SIGMOD 2001): two-phase matching with propagation, static and dynamic
schema-based clustering, registered as "propagation", "static" and "dynamic"."""

from matchers.fabret.propagation import PropagationMatcher

__all__ = ["PropagationMatcher"]
