"""Screens of the console; each displays a PipelineView and polls nothing."""
