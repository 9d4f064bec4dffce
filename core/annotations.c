#include "annotations.h"
