-- offending rows: a deployment that appears more than once in fct_azure_deployments
with

counts as (
    select deploymentid, count(*) as n_rows from fct_azure_deployments group by deploymentid
),

final as (
    select * from counts where n_rows > 1
)

select * from final
