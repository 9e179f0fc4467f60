"""Widgets shared by the console screens."""
