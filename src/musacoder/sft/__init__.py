"""Supervised fine-tuning (SFT, and RFT on pools of accepted samples) of a chat model with TRL's `SFTTrainer`.

A dataset row is a conversation; the loss is on one assistant turn (the last one, or `loss_turn`). Modules, in the
order the data flows: `config` (the run's options), `examples` (conversation → token ids and loss labels),
`dataset` (files or a data stage's folder → rows → the per-epoch training set), `trainer` (model, TRL, checkpoints,
resume rules, the stage manifest), `evaluate` (held-out tasks verified by MooreEval during training), `cli`.
"""
