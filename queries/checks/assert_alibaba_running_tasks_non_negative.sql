-- a task ends only after it started, so the running count never drops below zero
select
    time,
    running_tasks,
from agg_alibaba_running_tasks
where running_tasks < 0
