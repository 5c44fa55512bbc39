"""The core grouping job in DuckDB, for comparison with `settle plan` (issue 4).

Reads the CSV export (gzip or not), computes each line's group key as settle does
(transfer_group, else group_<payment_intent>, else order:<order_id>), and sums exact
minor units per (group, payee, source charge, currency); writes the groups to CSV.

    python3 benchmarks/duckdb_core.py INPUT.csv.gz OUTPUT.csv
"""
import sys

import duckdb

SQL = """
COPY (
    SELECT grp AS "group", payee, source_transaction, currency,
           SUM(CAST(CAST(amount AS DECIMAL(18, 3)) * scale AS BIGINT)) AS amount_minor,
           COUNT(*) AS lines
    FROM (
        SELECT CASE WHEN transfer_group IS NOT NULL THEN transfer_group
                    WHEN payment_intent IS NOT NULL THEN 'group_' || payment_intent
                    ELSE 'order:' || order_id END AS grp,
               COALESCE(destination, recipient) AS payee,
               source_transaction,
               lower(currency) AS currency,
               amount,
               CASE lower(currency) WHEN 'jpy' THEN 1 WHEN 'kwd' THEN 1000 ELSE 100 END AS scale
        FROM read_csv(?, header = true, all_varchar = true)
    )
    GROUP BY ALL
) TO '{out}' (HEADER, DELIMITER ',')
"""


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: duckdb_core.py INPUT OUTPUT")
    source, out = sys.argv[1], sys.argv[2]
    con = duckdb.connect()
    con.execute(SQL.format(out=out.replace("'", "''")), [source])


if __name__ == "__main__":
    main()
