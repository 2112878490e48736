"""Fabret et al. (SIGMOD 2001): two-phase matching with propagation, static and dynamic
schema-based clustering, registered as "propagation", "static" and "dynamic"."""

from matchers.fabret.dynamic import DynamicMatcher
from matchers.fabret.propagation import PropagationMatcher
from matchers.fabret.static_clustering import StaticMatcher

__all__ = ["DynamicMatcher", "PropagationMatcher", "StaticMatcher"]
