"""Adapters from musacoder to other training engines (each optional, imported only when used).

- `musacoder.integrations.verl`: verl 0.9 — a reward function calling `musacoder serve`, a multi-turn agent loop
  with MooreEval feedback turns, PrimeEcho, Buffered Dynamic Retry and a single-turn warm-up, and MirrorPop as a
  registered policy loss (`mirrorpop`). See docs/verl.md.
"""
