"""Training data: stage 1 task synthesis (catalogue variants and random operator graphs, each executed before it is
kept) and decontamination against a benchmark folder (KernelBench levels 1–3).

task spec (`spec`) -> source (`render`) -> execution check (`check`) -> kept task + manifest row (`synth`)
task folder -> structure signature (`signature`) + text shingles (`textsim`) -> contamination report (`decontam`)
"""
