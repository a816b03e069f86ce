// The turboquant C++ library: `#include <turboquant/turboquant.h>`, link turboquant::turboquant.
#pragma once

#include "turboquant/error.h"
#include "turboquant/model.h"
#include "turboquant/plan.h"
