# node n0 as scripts/swarm.sh started it (swarm.sh restart --node n0 runs this again)
cd /work/main
export SAPO_BASE=/tmp/smol-base
export SAPO_FORMAT_STEPS=0
export SAPO_PRESET=smollm2-135m
export SAPO_NODE=n0 SAPO_RUN=/tmp/smol-a/n0 SAPO_BROKER=/tmp/smol-a/n0 SAPO_REDIS=redis://127.0.0.1:6394
export SAPO_LOCAL_GROUPS=4 SAPO_EXTERNAL_GROUPS=0 SAPO_ROUNDS=2 SAPO_SEED=1000 SAPO_MODEL=''
exec perl -e setpgrp\(0\,\ 0\)\;\ exec\ @ARGV\ or\ die\ \"\$ARGV\[0\]:\ \$\!\\n\" foreman start -f Procfile -d . -m all=1\,redis=0\,generator=1 >> /tmp/smol-a/n0/node.log 2>&1 < /dev/null
