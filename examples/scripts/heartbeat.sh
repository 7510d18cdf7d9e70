#!/bin/sh
# A quickstart job: says which schedule fired, under which fencing token, for which planned time,
# on which node. baton passes these in BATON_* environment variables.
echo "heartbeat: schedule=${BATON_SCHEDULE} fence=${BATON_FENCING_TOKEN} fire_time=${BATON_FIRE_TIME} node=${BATON_CONTENDER_ID}"
