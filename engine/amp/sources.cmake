# engine/amp: recipes, loss scaler, precision application.
target_sources(engine_amp PRIVATE
  amp/grad_set.cpp
  amp/loss_scaler.cpp
  amp/recipe.cpp
  amp/apply.cpp
)
