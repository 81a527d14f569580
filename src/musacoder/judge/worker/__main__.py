"""`python -m musacoder.judge.worker FD_IN FD_OUT`: a worker started without the fork server."""

from musacoder.judge.worker.rpc import main

main()
