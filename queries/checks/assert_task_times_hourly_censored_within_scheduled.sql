-- an hour's censored incarnations are among the incarnations scheduled in it, and its means
-- are durations: none negative
select *
from agg_task_times_hourly
where n_censored > n_scheduled
    or n_censored < 0
    or scheduling_mean_s < 0
    or execution_mean_s < 0
