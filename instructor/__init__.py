"""Instructor tools for the graded assignment (see docs/instructors.md)."""
