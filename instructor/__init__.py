"""Instructor tools for the graded assignment (see README, instructor section)."""
