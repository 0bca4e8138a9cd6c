#!/usr/bin/env bash
# Issue 15, a third call (after run_s73a.sh / run_s73b.sh on the same machine, ~3 min; no sweep entry needed): the
# 8B gate / up at 136 / 160 tokens on 48's weight-multicast pairs with one split (cuBLAS's 70B form; 448 CTAs, 3.4
# waves) against 40.
#   bash docs/wip/run_s73c.sh        (logs under $OUT)
V="g48=4096,28672:48:1" TESTS= MS=160,136 MODELS=8b exec bash docs/wip/run_s72.sh
