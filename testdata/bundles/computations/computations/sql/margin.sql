/* Gross margin: revenue minus every cost of goods. */
SELECT SUM(l.revenue) - SUM(l.product_cost + l.freight_cost + l.packaging_cost) AS gross_margin
FROM order_lines AS l
WHERE l.shipped_on BETWEEN $period_start AND $period_end
  AND ($region IS NULL OR l.region = $region);
