"""What each notebook needs that no tool prints, one module per notebook (latency: 1, topology: 2,
p2p_test: 3, collectives: 4, training: 5, nccl_view: 6); import it by name, e.g.
`from gputopo.lessons import training`. Each module's docstring says what it holds.
"""
