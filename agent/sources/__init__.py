"""Inputs other than live NVML: saved `nvidia-smi -q -x` / `-q` output and `nvidia-smi topo -m`.

Each parser is a pure function from text to plain data, tested on real samples; `saved.py`
turns their output into a report.
"""
