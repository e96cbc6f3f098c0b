"""``python -m whileai_openai.testing --latency 0.05``: serve a fault app until killed."""

from whileai_openai.testing.fault_server import main

main()
