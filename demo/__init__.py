"""The demo fleet: a declared fleet loaded through the real API, in the composition layer.

The backend's only importer of `simulator/`; `manage.py demo [--keep-alive URL]` is its command.
"""
