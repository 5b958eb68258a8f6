# engine/amp: recipes, loss scaler, precision application.
target_sources(engine_amp PRIVATE
  amp/loss_scaler.cpp
  amp/recipe.cpp
  amp/apply.cpp
)
