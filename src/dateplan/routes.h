// HTTP routes of the date-plan service (the reference's paths):
//   GET    /datePlan, /datePlan/        a uniformly random plan (?category=)
//   POST   /datePlan                    create -> 201 + Location + editToken
//   GET    /datePlan/ranking?limit=10   most liked first
//   GET    /datePlan/categories         categories with plan counts
//   GET    /datePlan/{id}
//   PUT    /datePlan/{id}               edit token or admin token
//   DELETE /datePlan/{id}               edit token or admin token
//   POST   /datePlan/{id}/like          -> {"id":1,"like":N}
#pragma once

#include "dateplan/service.h"
#include "http/router.h"

namespace hotrow::dateplan {

void AddRoutes(http::Router& router, DatePlanService& service);

}  // namespace hotrow::dateplan
