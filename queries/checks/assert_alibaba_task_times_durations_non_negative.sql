-- an execution time is end - start of a task that ended at or after its start: never negative,
-- and only for ended tasks
select
    job_name,
    task_name,
    status,
    execution_time_s,
from fct_alibaba_task_times
where execution_time_s < 0 or (execution_time_s is not null and terminal_state is null)
