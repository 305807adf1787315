"""What each notebook needs that no tool prints, one module per notebook (import it by name,
e.g. `from gputopo.lessons import training`):

    latency       notebook 1: fits per copy series, the PCIe link from nvidia-smi's query
    topology      notebook 2: the two 8x V100 wirings, lscpu's summary, verdicts on recorded figures
    p2p_test      notebook 3: the P2P test's cells against their link's peak
    collectives   notebook 4: recorded benchmark tables and their links, the what-if panel
    training      notebook 5: NCCL's P2P rule, the recorded CNN runs, step times
    nccl_view     notebook 6: NCCL's topology and graph dumps against nvidia-smi, its choices
"""
